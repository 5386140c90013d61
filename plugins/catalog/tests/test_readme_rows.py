"""Each example of this plugin's rows in README.md's command table runs: the placeholders (FILE,
ENV, QUERY, SOURCE, DEST) filled with a catalog built here, and an image in a real local registry."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from catalog_helpers import push_image
from typer.testing import Result

README = Path(__file__).resolve().parents[3] / "README.md"
GROUPS = ("catalog", "discover", "fork", "skills")


def _examples() -> list[list[str]]:
    """The commands of the README rows of this plugin: a row's cell holds `openenv A ...` then
    `/`-separated `B ...` (further commands of the same group)."""
    commands = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `openenv "):
            continue
        cell = line.split(" | ")[0].removeprefix("| ")
        parts = [p.replace("\\|", "|") for p in re.findall(r"`([^`]+)`", cell)]
        first = shlex.split(parts[0])
        if first[1] not in GROUPS:
            continue
        commands.append(first[1:])
        # `openenv catalog build ...` / `inspect ...`: the later parts name a sibling of the first's group
        prefix = first[1:2] if first[1] in ("catalog", "skills") else []
        commands += [prefix + shlex.split(p) for p in parts[1:]]
    return commands


def test_the_rows_are_the_ones_this_test_runs() -> None:
    assert _examples() == [
        ["catalog", "build", "-o", "catalog.json"], ["catalog", "inspect", "FILE|URL", "[ENV]"],
        ["discover", "QUERY", "--catalog", "FILE|URL"], ["fork", "SOURCE", "DEST"],
        ["skills", "preview"], ["skills", "add", "--claude"]]


@pytest.mark.parametrize("example", _examples(), ids=" ".join)
def test_each_row_runs(example: list[str], make_repo: Callable[[dict[str, str]], Path],
                       openenv: Callable[..., Result], request: pytest.FixtureRequest,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"envs/guess/pyproject.toml": '[project]\nname = "guess-env"\n',
                      "envs/guess/openenv.yaml": "name: guess\ntags: [puzzle]\n"})
    monkeypatch.chdir(repo)
    values = {"FILE|URL": "catalog.json", "[ENV]": "guess", "QUERY": "puzzle"}
    if example[0] == "fork":  # only this row needs the registries (skipped without docker-registry)
        a, b = request.getfixturevalue("registries")
        push_image(a, "guess", "v1", b"layer")
        values |= {"SOURCE": f"{a}/guess:v1", "DEST": f"{b}/guess:v1"}
    if "catalog.json" in [values.get(arg) for arg in example]:
        assert openenv("catalog", "build", "-o", "catalog.json").exit_code == 0
    args = [values.get(arg, arg) for arg in example]
    result = openenv(*args)
    assert result.exit_code == 0, (args, result.output)


def test_root_help_lists_the_four_groups(tmp_path: Path) -> None:
    """``openenv --help`` as a user runs it (the installed entry point, the help cache both missed and hit)."""
    import os
    import subprocess
    import sys

    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "openenv", "--help"], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "OPENENV_CACHE_DIR": str(tmp_path), "COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        listed = {line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and line.split()}
        assert set(GROUPS) <= listed, done.stdout
