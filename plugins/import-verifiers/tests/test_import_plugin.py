"""What of ``openenv import`` works without verifiers installed: the source form, the output-folder
guard, the one-line error naming the missing package, and the ``verifiers_rewards`` rubric. The
import of a real taskset, served and played, is tests/verifiers/test_import_verifiers.py
(``nox -s verifiers``)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from openenv_import_verifiers.generate import generate, parse_source
from openenv_import_verifiers.legacy import parse_args
from openenv_import_verifiers.rubric import VerifiersRewards
from openenv_import_verifiers.taskset import VerifiersImportError


@pytest.mark.parametrize(("source", "message"), [
    ("my_taskset", "give verifiers:<module>"),
    ("ors:my_env", "give verifiers:<module>"),  # the command sends ors: elsewhere (ors_generate)
    ("verifiers:", "give verifiers:<module>"),
    ("verifiers:my-taskset", "is not a Python module name"),
])
def test_a_source_that_is_not_verifiers_module_is_refused(source: str, message: str) -> None:
    with pytest.raises(VerifiersImportError, match=message):
        parse_source(source)


def test_a_module_source_names_the_module() -> None:
    assert parse_source("verifiers:pkg.tasks") == "pkg.tasks"


def test_load_environment_arguments_read_json_values_else_text() -> None:
    assert parse_args(["n=3", "forms=[\"haiku\"]", "flag=true", "split=test", "empty=", "eq=a=b"]) == {
        "n": 3, "forms": ["haiku"], "flag": True, "split": "test", "empty": "", "eq": "a=b"}
    for bad in ("n", "=3", "my-key=1"):
        with pytest.raises(VerifiersImportError, match="is not KEY=VALUE"):
            parse_args([bad])


def test_an_existing_output_folder_is_refused_before_anything_is_imported(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    with pytest.raises(VerifiersImportError, match="already exists: pick another -o, or pass --force"):
        generate("verifiers:no_such_module_here", tmp_path / "out")
    with pytest.raises(VerifiersImportError, match="--name"):
        generate("verifiers:no_such_module_here", tmp_path / "new", name="Bad-Name")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.skipif(importlib.util.find_spec("verifiers") is not None, reason="verifiers is installed here")
def test_without_verifiers_the_command_says_what_to_install(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "openenv", "import", "verifiers:my_taskset", "-o",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "pip install 'verifiers>=0.4,<0.5'" in line
    assert not (tmp_path / "out").exists()


def test_the_rubric_reports_verifiers_score_and_its_named_rewards() -> None:
    rubric = VerifiersRewards(name="verifiers_rewards")
    scored = rubric.score(None, SimpleNamespace(reward=1.5, rewards={"exact": 1.0, "format": 0.5}))
    assert scored.score == 1.5 and scored.components == {"exact": 1.0, "format": 0.5}
    unscored = rubric.score(None, SimpleNamespace(reward=None, rewards={}))
    assert unscored.score == 0.0 and unscored.components == {}


@pytest.mark.skipif(importlib.util.find_spec("openreward") is not None, reason="openreward is installed here")
def test_without_openreward_the_ors_command_says_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "env.py").write_text("X = 1\n")
    done = subprocess.run([sys.executable, "-m", "openenv", "import", "ors:env.py", "-o", "out"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: openreward is not installed") and "pip install 'openreward>=0.1.167,<0.2'" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("argument", "message"), [
    ("--reward-range=1", "--reward-range '1' is not LOW,HIGH"),
    ("--name=Bad-Name", "env name 'Bad-Name' must be lower-case"),
])
def test_bad_ors_options_are_one_line(tmp_path: Path, argument: str, message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "openenv", "import", "ors:env.py", argument], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert message in line
