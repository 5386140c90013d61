"""Tables at 80 columns keep every identifier whole: an env name, a reference, a plugin, a check
name or a result is never wrapped or cut (prose columns wrap between words instead, and a column
that cannot fit is left out with a caption that says so)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def openenv(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def _first_cells(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    return [line.split()[0] for line in lines[rule + 1:] if line and not line.startswith(" ") and
            not line.startswith("(")]


@pytest.mark.parametrize(("args", "json_args", "key"), [
    (("envs", "list"), ("envs", "list", "--json"), "envs"),
    (("providers", "list"), ("providers", "list", "--json"), "providers"),
])
def test_listings_keep_names_whole_at_80_columns(args: tuple[str, ...], json_args: tuple[str, ...],
                                                 key: str) -> None:
    done = openenv(*args)
    assert done.returncode == 0, done.stderr
    assert all(len(line) <= 80 for line in done.stdout.splitlines())
    names = {row["name"] for row in json.loads(openenv(*json_args).stdout)[key]}
    assert set(_first_cells(done.stdout)) == names  # each name whole, on its own row's first line
    if "Reference" in done.stdout.splitlines()[0]:
        refs = [row["ref"] for row in json.loads(openenv(*json_args).stdout)[key]]
        assert all(ref in done.stdout for ref in refs)
    else:
        assert "Reference left out to fit 80 columns" in done.stdout


def test_validate_keeps_check_names_and_results_whole() -> None:
    done = openenv("validate", "openenv.testing.envs:EchoEnv")
    doc = json.loads(openenv("validate", "openenv.testing.envs:EchoEnv", "--json").stdout)
    rows = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines()
            if line and not line.startswith(" ") and len(line.split()) > 1}
    for check in doc["checks"]:
        assert rows.get(check["name"]) == {"pass": "pass", "fail": "FAIL", "n/a": "n/a"}.get(
            check["status"], check["status"]), (check, done.stdout)
