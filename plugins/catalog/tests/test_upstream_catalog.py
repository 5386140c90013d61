"""Upstream's catalog snapshots (written by upstream 0.10's own ``openenv catalog build``: tests/data)
are read by ``inspect`` and ``discover``; an incomplete or edited one is refused in one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

UPSTREAM = Path(__file__).resolve().parent / "data" / "upstream-0.10-catalog.json"


def test_inspect_and_discover_read_an_upstream_snapshot(openenv: Callable[..., Result]) -> None:
    listed = openenv("catalog", "inspect", str(UPSTREAM), "--json")
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.stdout)
    raw = json.loads(UPSTREAM.read_text(encoding="utf-8"))
    assert doc["source"]["repository"] == raw["source"]["uri"]
    assert [e["name"] for e in doc["entries"]] == ["echo_env", "maze"]
    maze = doc["entries"][1]
    revision = raw["source"]["revision"]
    assert maze["tags"] == ["game", "grid"] and maze["description"] == "Find the exit of a generated maze."
    assert maze["install"]["command"] == (
        f"pip install 'git+https://github.com/acme/envs.git@{revision}#subdirectory=envs/maze'")
    found = json.loads(openenv("discover", "grid", "--catalog", str(UPSTREAM), "--json").stdout)
    assert [(r["name"], r["installed"]) for r in found["results"]] == [("maze", False)]


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda d: d.update(complete=False), "the upstream catalog is incomplete (complete: false)"),
    (lambda d: d["entries"][0].update(description="edited"), "does not match its digest"),
    (lambda d: d.update(schema_version="0.2"), "schema_version '0.2' is not supported"),
])
def test_a_bad_upstream_snapshot_is_refused(openenv: Callable[..., Result], tmp_path: Path,
                                            edit: Callable[[dict], None], expected: str) -> None:
    doc = json.loads(UPSTREAM.read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / "up.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = openenv("catalog", "inspect", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr


def test_upstreams_spellings_of_build_and_inspect(make_repo: Callable[[dict[str, str]], Path],
                                                 openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = make_repo({"envs/a/openenv.yaml": "name: a\n"})
    out = tmp_path / "c.json"
    built = openenv("catalog", "build", "--repository", str(repo), "--repository-uri", "https://github.com/x/y.git",
                    "--revision", "main", "--output", str(out))
    assert built.exit_code == 0, built.output
    assert json.loads(out.read_text(encoding="utf-8"))["source"]["repository"] == "https://github.com/x/y.git"
    one = openenv("catalog", "inspect", "a", "--catalog", str(out), "--json")
    assert one.exit_code == 0 and json.loads(one.stdout)["name"] == "a"
    twice = openenv("catalog", "inspect", "a", "b", "--catalog", str(out))
    assert twice.exit_code == 2 and "give the catalog once" in twice.stderr
    none = openenv("catalog", "inspect")
    assert none.exit_code == 2 and "give a catalog" in none.stderr
