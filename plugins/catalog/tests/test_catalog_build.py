"""``openenv catalog build|inspect``: from committed manifests only, checked against the schema, and
each bad input refused in one line with nothing written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from catalog_helpers import check_catalog, git
from typer.testing import Result

ROOT = Path(__file__).resolve().parents[3]

ECHO = """spec_version: 1
name: echo
description: "Echoes a message back."
version: "0.2.0"
tags: [example, text]
tools: [echo_message]
reward_range: [0.0, 1.0]
action:
  properties:
    message: {type: string}
observation:
  properties:
    echoed: {type: string}
    length: {type: integer}
tasks:
  seeds: {train: [0, 100], dev: [100, 120]}
  split_types: {dev: validation}
"""
ECHO_PYPROJECT = '[project]\nname = "acme-env-echo"\nversion = "0.2.0"\n'
MAZE = "spec_version: 1\nname: maze\ntags: [grid]\ntasks:\n  file: tasks.jsonl\n  split_types: {train: train}\n"


def _repo(make_repo: Callable[[dict[str, str]], Path]) -> Path:
    return make_repo({"envs/echo/pyproject.toml": ECHO_PYPROJECT,
                      "envs/echo/src/acme_echo/openenv.yaml": ECHO,
                      "envs/echo/src/acme_echo/env.py": "raise SystemExit('env code must never run')\n",
                      "envs/maze/openenv.yaml": MAZE})


def _one_line_error(result: Result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_build_writes_every_committed_env_with_its_metadata(make_repo: Callable[[dict[str, str]], Path],
                                                           openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = _repo(make_repo)
    out = tmp_path / "catalog.json"
    result = openenv("catalog", "build", "--repo", str(repo), "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = check_catalog(out)
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert doc["schema"] == "openenv.catalog/1"
    assert doc["source"] == {"repository": str(repo.resolve()), "revision": sha, "ref": "HEAD", "root": "envs"}
    echo, maze = doc["entries"]
    assert echo == {
        "name": "echo", "version": "0.2.0", "description": "Echoes a message back.", "tags": ["example", "text"],
        "examples": [], "tools": ["echo_message"], "reward_range": [0.0, 1.0],
        "schemas": {"action": {"message": "string"}, "observation": {"echoed": "string", "length": "integer"}},
        "tasks": {"source": "seeds", "splits": [{"name": "dev", "type": "validation", "count": 20},
                                                {"name": "train", "type": "train", "count": 100}]},
        "source": {"manifest": "envs/echo/src/acme_echo/openenv.yaml", "package": "envs/echo", "revision": sha},
        "install": {"dist": "acme-env-echo", "path": "envs/echo", "command": "pip install ./envs/echo"},
    }
    # No pyproject.toml above it: no distribution name, nothing to pip install.
    assert maze["install"] == {"dist": None, "path": None, "command": None}
    assert maze["schemas"] == {"action": None, "observation": None}
    assert maze["tasks"] == {"source": "file", "file": "tasks.jsonl",
                             "splits": [{"name": "train", "type": "train", "count": None}]}

    shown = openenv("catalog", "inspect", str(out))
    assert shown.exit_code == 0 and "echo" in shown.stdout and "maze" in shown.stdout
    one = openenv("catalog", "inspect", str(out), "echo")
    assert one.exit_code == 0
    assert "message: string" in one.stdout and "dev (validation, 20)" in one.stdout
    assert json.loads(openenv("catalog", "inspect", str(out), "echo", "--json").stdout) == echo


def test_install_hint_names_the_remote_at_the_revision(make_repo: Callable[[dict[str, str]], Path],
                                                      openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = _repo(make_repo)
    out = tmp_path / "c.json"
    assert openenv("catalog", "build", "--repo", str(repo), "-o", str(out),
                   "--repo-url", "https://github.com/acme/envs").exit_code == 0
    doc = check_catalog(out)
    sha = doc["source"]["revision"]
    assert doc["entries"][0]["install"]["command"] == (
        f"pip install 'acme-env-echo@git+https://github.com/acme/envs@{sha}#subdirectory=envs/echo'")


def test_uncommitted_changes_are_never_read(make_repo: Callable[[dict[str, str]], Path],
                                           openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = _repo(make_repo)
    manifest = repo / "envs/echo/src/acme_echo/openenv.yaml"
    manifest.write_text(ECHO.replace("Echoes a message back.", "UNCOMMITTED"), encoding="utf-8")
    out = tmp_path / "c.json"
    # From HEAD with a dirty manifest: refused, with the way out.
    error = _one_line_error(openenv("catalog", "build", "--repo", str(repo), "-o", str(out)))
    assert "envs/echo/src/acme_echo/openenv.yaml" in error and "--rev HEAD" in error and "Commit" in error
    assert not out.exists()
    # An untracked manifest counts too.
    manifest.write_text(ECHO, encoding="utf-8")
    (repo / "envs/new").mkdir()
    (repo / "envs/new/openenv.yaml").write_text("name: new\n", encoding="utf-8")
    assert "envs/new/openenv.yaml" in _one_line_error(openenv("catalog", "build", "--repo", str(repo), "-o", str(out)))
    # --rev given: the committed text, never the work tree's.
    manifest.write_text(ECHO.replace("Echoes a message back.", "UNCOMMITTED"), encoding="utf-8")
    assert openenv("catalog", "build", "--repo", str(repo), "--rev", "HEAD", "-o", str(out)).exit_code == 0
    doc = check_catalog(out)
    assert [e["name"] for e in doc["entries"]] == ["echo", "maze"]
    assert doc["entries"][0]["description"] == "Echoes a message back."


def test_an_older_revision_is_built_as_it_was(make_repo: Callable[[dict[str, str]], Path],
                                             openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = _repo(make_repo)
    first = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "rm", "-q", "envs/maze/openenv.yaml")
    git(repo, "commit", "-q", "-m", "drop maze")
    git(repo, "tag", "v1", first)
    out = tmp_path / "c.json"
    assert openenv("catalog", "build", "--repo", str(repo), "--rev", "v1", "-o", str(out)).exit_code == 0
    doc = check_catalog(out)
    assert doc["source"]["revision"] == first and doc["source"]["ref"] == "v1"
    assert [e["name"] for e in doc["entries"]] == ["echo", "maze"]
    assert openenv("catalog", "build", "--repo", str(repo), "-o", str(out)).exit_code == 0
    assert [e["name"] for e in check_catalog(out)["entries"]] == ["echo"]


@pytest.mark.parametrize(("files", "args", "expected"), [
    ({"envs/a/openenv.yaml": "name: a\nport: 99999\n"}, [],
     "envs/a/openenv.yaml: invalid manifest: 'port' (line 2)"),
    ({"envs/a/openenv.yaml": "name: a\ntasks: {seeds: {train: [0, 5]}, file: t.jsonl}\n"}, [], "'tasks'"),
    ({"envs/a/openenv.yaml": "name: [a\n"}, [], "envs/a/openenv.yaml: not valid YAML"),
    ({"envs/a/openenv.yaml": "name: a\n", "envs/b/openenv.yaml": "name: a\n"}, [],
     "envs/b/openenv.yaml: env name 'a' is also declared by envs/a/openenv.yaml"),
    ({"envs/a/openenv.yaml": "name: a\n"}, ["--rev", "nope"], "unknown revision 'nope'"),
    ({"envs/a/openenv.yaml": "name: a\n"}, ["--root", "packages"], "--root packages: no such folder"),
    ({"envs/a/README.md": "no manifest\n"}, [], "no openenv.yaml under envs/"),
])
def test_bad_input_is_one_line_and_writes_nothing(make_repo: Callable[[dict[str, str]], Path],
                                                  openenv: Callable[..., Result], tmp_path: Path,
                                                  files: dict[str, str], args: list[str], expected: str) -> None:
    repo = make_repo(files)
    out = tmp_path / "catalog.json"
    error = _one_line_error(openenv("catalog", "build", "--repo", str(repo), "-o", str(out), *args))
    assert expected in error
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".catalog")] == []


def test_not_a_repository_and_bad_catalogs(openenv: Callable[..., Result], tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    assert "not a git repository" in _one_line_error(openenv("catalog", "build", "--repo", str(tmp_path), "-o",
                                                             str(out)))
    assert not out.exists()
    assert "no such file; build one with `openenv catalog build" in _one_line_error(
        openenv("catalog", "inspect", str(out)))
    out.write_text('{"schema": "openenv.catalog/1", "source": {}, "entries": []}', encoding="utf-8")
    assert "not a valid openenv.catalog/1 catalog: at 'source'" in _one_line_error(openenv("catalog", "inspect",
                                                                                          str(out)))
    out.write_text("{", encoding="utf-8")
    assert "not JSON" in _one_line_error(openenv("catalog", "inspect", str(out)))


def test_inspect_suggests_a_close_name(make_repo: Callable[[dict[str, str]], Path],
                                      openenv: Callable[..., Result], tmp_path: Path) -> None:
    repo = _repo(make_repo)
    out = tmp_path / "c.json"
    assert openenv("catalog", "build", "--repo", str(repo), "-o", str(out)).exit_code == 0
    assert "did you mean 'echo'?" in _one_line_error(openenv("catalog", "inspect", str(out), "ecko"))


def test_this_repository_head_lists_every_env(openenv: Callable[..., Result], tmp_path: Path) -> None:
    """Built from the real HEAD of a clone of this repository: every package in envs/ is an entry."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone)], check=True,
                   capture_output=True, timeout=300)
    out = tmp_path / "catalog.json"
    result = openenv("catalog", "build", "--repo", str(clone), "-o", str(out))
    assert result.exit_code == 0, result.output
    doc = check_catalog(out)
    folders = sorted({line.split("/")[1] for line in git(clone, "ls-tree", "-r", "--name-only", "HEAD", "envs")
                     .splitlines()})
    packages = sorted({e["install"]["path"] for e in doc["entries"]})
    assert packages == [f"envs/{f}" for f in folders]
    assert all(e["install"]["dist"] and e["install"]["dist"].startswith("openenvkit-env-") for e in doc["entries"])
    assert doc["source"]["revision"] == git(clone, "rev-parse", "HEAD").strip()
