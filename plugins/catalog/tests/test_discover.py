"""``openenv discover``: ranks catalog entries (a file, or a URL served by a real local HTTP server)
and installed envs by the documented score, says which are installed and how to get the others."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from catalog_helpers import check_catalog
from typer.testing import Result

from openenv.hookspecs import hookimpl
from openenv.plugins import PluginManager
from openenv_catalog.cli_catalog import rank, score

FILES = {
    "envs/wordle/pyproject.toml": '[project]\nname = "acme-env-wordle"\nversion = "1.0"\n',
    "envs/wordle/openenv.yaml": "name: wordle\ndescription: Guess a five-letter word.\ntags: [game, word-game]\n",
    "envs/sql/pyproject.toml": '[project]\nname = "acme-env-sql"\nversion = "1.0"\n',
    "envs/sql/openenv.yaml": "name: sql\ndescription: Answer questions with queries.\ntools: [run_query]\n",
    "envs/chess/pyproject.toml": '[project]\nname = "acme-env-chess"\nversion = "1.0"\n',
    "envs/chess/openenv.yaml": "name: chess\ndescription: Chess against an engine.\ntags: [game, board]\n",
}


@pytest.fixture
def catalog(make_repo: Callable[[dict[str, str]], Path], openenv: Callable[..., Result], tmp_path: Path) -> Path:
    out = tmp_path / "site" / "catalog.json"
    out.parent.mkdir()
    repo = make_repo(FILES)
    built = openenv("catalog", "build", "--repo", str(repo), "-o", str(out))
    assert built.exit_code == 0, built.output
    check_catalog(out)
    return out


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the CLI's stderr is under test
        pass


@pytest.fixture
def served(catalog: Path) -> Iterator[str]:
    """The catalog's folder served by the standard library's HTTP server on 127.0.0.1."""
    handler = functools.partial(_Quiet, directory=str(catalog.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class _InstalledChess:
    """An installed env named like a catalog entry (its manifest is not needed to be found)."""

    @hookimpl
    def openenv_register_envs(self, registry: object) -> None:
        registry.register("chess", "nowhere.never_imported:Chess",  # type: ignore[attr-defined]
                          description="Chess against an engine (installed).")


def test_score_follows_the_documented_weights() -> None:
    entry = {"name": "wordle", "tags": ["word-game"], "examples": ["guess a word"],
             "description": "a puzzle", "tools": ["lookup"]}
    assert score(entry, ["wordle"]) == 5
    assert score(entry, ["word"]) == 2 + 3 + 2  # part of the name, part of a tag, in an example
    assert score(entry, ["puzzle"]) == 1
    assert score(entry, ["lookup"]) == 1
    assert score(entry, ["nothing"]) == 0


def test_discover_from_a_catalog_url_marks_installed_ones(served: str, openenv: Callable[..., Result],
                                                         catalog_only: PluginManager) -> None:
    catalog_only.register(_InstalledChess(), name="chess-env")
    url = f"{served}/catalog.json"
    result = openenv("discover", "game", "--catalog", url, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [(r["name"], r["installed"], r["score"]) for r in doc["results"]] == [("chess", True, 3),
                                                                                  ("wordle", False, 3)]
    wordle = doc["results"][1]
    assert wordle["catalog"] == url and wordle["install"] == "pip install ./envs/wordle"
    assert doc["results"][0]["install"] is None
    table = openenv("discover", "query", "--catalog", url)
    assert table.exit_code == 0
    assert "sql" in table.stdout and "pip install ./envs/sql" in table.stdout
    assert "chess" not in table.stdout


def test_rank_puts_names_before_tags_before_text(catalog: Path) -> None:
    from openenv_catalog.catalog import load_catalog

    doc = load_catalog(str(catalog))
    ranked = rank("chess game", [(str(catalog), doc)], [])
    assert [(s, r["name"]) for s, r in ranked] == [(9, "chess"), (3, "wordle")]


def test_nothing_matches_gives_did_you_mean(catalog: Path, openenv: Callable[..., Result]) -> None:
    result = openenv("discover", "wordel", "--catalog", str(catalog))
    assert result.exit_code == 1
    assert result.stderr.strip() == ("error: nothing in 1 catalog(s) and the installed envs matches 'wordel': "
                                     "did you mean 'wordle', 'word-game'? try other words.")


def test_a_bad_catalog_url_is_one_line(served: str, openenv: Callable[..., Result]) -> None:
    result = openenv("discover", "game", "--catalog", f"{served}/missing.json")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {served}/missing.json: HTTP 404; check the URL (it must serve the catalog JSON file)."]
    down = openenv("discover", "game", "--catalog", "http://127.0.0.1:9/catalog.json")
    assert down.exit_code == 2 and "cannot be fetched" in down.stderr
    inspected = openenv("catalog", "inspect", f"{served}/catalog.json", "sql")
    assert inspected.exit_code == 0 and "run_query" in inspected.stdout


def test_an_empty_query_lists_all_and_filters_are_exact(catalog: Path, openenv: Callable[..., Result]) -> None:
    everything = json.loads(openenv("discover", "--catalog", str(catalog), "--json").stdout)
    assert [(r["name"], r["score"]) for r in everything["results"]] == [("chess", 0), ("sql", 0), ("wordle", 0)]
    games = json.loads(openenv("discover", "--catalog", str(catalog), "--filter", "tags=game", "--json").stdout)
    assert [r["name"] for r in games["results"]] == ["chess", "wordle"]
    one = json.loads(openenv("discover", "game", "--catalog", str(catalog), "--filter", "name=wordle",
                             "--filter", "installed=no", "--json").stdout)
    assert [r["name"] for r in one["results"]] == ["wordle"]
    none = openenv("discover", "game", "--catalog", str(catalog), "--filter", "tags=board-game")
    assert none.exit_code == 1 and "with --filter tags=board-game: drop a filter" in none.stderr


@pytest.mark.parametrize(("value", "expected"), [
    ("tag=game", "unknown key 'tag': did you mean 'tags'?"),
    ("tags", "write KEY=VALUE"),
    ("name=a --filter name=b", "given twice"),
])
def test_a_bad_filter_is_one_line(catalog: Path, openenv: Callable[..., Result], value: str, expected: str) -> None:
    args = [arg for part in value.split(" --filter ") for arg in ("--filter", part)]
    result = openenv("discover", "x", "--catalog", str(catalog), *args)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr, result.stderr
