"""``openenv import ors:PATH_OR_MODULE`` end to end: a real ORS environment (tests/ors/arith_ors.py,
written against the ``openreward`` package: a train and a test split, a ``submit`` tool that grades
the answer and a ``hint`` tool) is imported into an env package, the package is installed into this
venv, ``openenv serve`` serves it as a real process, and a scripted policy resets to a task, lists
the tools and calls ``submit``: the right answer gets reward 1.0 and ends the episode, a wrong one
0.0. ``openenv validate`` passes on the package. Bad input gets one ``error:`` line and writes
nothing. Runs in ``nox -s ors``; skipped where openreward is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

pytest.importorskip("openreward.environments", reason="needs openreward (nox -s ors)")

from openenv.client import GenericEnvClient

FIXTURE = Path(__file__).with_name("arith_ors.py")


def _openenv(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "PYTHONPATH")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """The ORS env as a user has it: one .py file in a folder of its own."""
    folder = tmp_path / "ors_src"
    folder.mkdir()
    shutil.copy2(FIXTURE, folder / "arith_ors.py")
    return folder / "arith_ors.py"


@pytest.fixture
def installed(tmp_path: Path, source: Path, install_generated: Callable[[Path, str], Path]) -> Path:
    """The imported package, installed into this venv (uninstalled after)."""
    done = _openenv("import", f"ors:{source}", "-o", str(tmp_path / "pkg"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "train 3, test 2" in done.stdout
    # openreward, the kernel and the plugin are already here (the index is not needed)
    return install_generated(tmp_path / "pkg", "openenv-ors-arith-ors")


@pytest.fixture
def served(installed: Path, serve_installed: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    # From an empty folder and without PYTHONPATH: the ORS module must come from the package
    with serve_installed("arith_ors") as url:
        yield url


def _submit(answer: str) -> dict[str, object]:
    return {"type": "call_tool", "tool_name": "submit", "arguments": {"answer": answer}}


def test_an_imported_ors_env_is_served_with_its_tools_and_rewards(served: str) -> None:
    with GenericEnvClient(served).sync() as client:
        first = client.reset(task_id="train-sum-1")
        assert first.observation["prompt_text"] == "What is 3+4? Call submit with the number."
        assert first.observation["prompt"] == [{"type": "text", "text": first.observation["prompt_text"]}]
        assert sorted(t["name"] for t in first.observation["tools"]) == ["hint", "submit"]
        listed = client.step({"type": "list_tools"})
        submit = next(t for t in listed.observation["tools"] if t["name"] == "submit")
        assert submit["input_schema"]["required"] == ["answer"]  # ORS's own input model

        hint = client.step({"type": "call_tool", "tool_name": "hint", "arguments": {}})
        assert not hint.done and hint.reward is None
        assert hint.observation["result"]["content"] == [{"type": "text", "text": "1 digit(s)"}]

        right = client.step(_submit("7"))
        assert right.done and right.reward == 1.0
        assert right.observation["result"]["structured_content"]["metadata"] == {"attempts": 1}
        assert right.observation["result"]["content"] == [{"type": "text", "text": "correct"}]
        # the episode is over, as ORS said: a further call is refused, and the server keeps serving
        with pytest.raises(Exception, match="reset"):
            client.step(_submit("7"))

        drawn = client.reset(split="test")  # a task of the test split (the server draws it)
        assert drawn.observation["task_id"] in ("test-sum-0", "test-sum-1")
        client.reset(task_id="test-sum-0")
        # bad arguments: ORS's own validation, in band; the episode goes on
        bad = client.step({"type": "call_tool", "tool_name": "submit", "arguments": {"number": 12}})
        assert bad.observation["error"]["error_type"] == "invalid_args" and not bad.done
        assert "answer" in bad.observation["error"]["message"]
        wrong = client.step(_submit("13"))
        assert wrong.done and wrong.reward == 0.0
        assert wrong.observation["result"]["content"] == [{"type": "text", "text": "wrong"}]
        assert client.state()["task_id"] == "test-sum-0" and client.state()["done"] is True


def test_the_imported_env_passes_openenv_validate(tmp_path: Path, installed: Path) -> None:
    done = _openenv("validate", "arith_ors", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] not in ("pass", "n/a")]
    assert report["ok"] and not failed, failed
    manifest = (installed / "src" / "openenv_ors_arith_ors" / "openenv.yaml").read_text()
    assert "tools: [hint, submit]" in manifest and "reward_range: [0.0, 1.0]" in manifest
    rows = [json.loads(line) for line in
            (installed / "src" / "openenv_ors_arith_ors" / "tasks.jsonl").read_text().splitlines()]
    assert [(r["id"], r["split"], r["data"]["answer"]) for r in rows] == [
        ("train-sum-0", "train", "4"), ("train-sum-1", "train", "7"), ("train-sum-2", "train", "17"),
        ("test-sum-0", "test", "12"), ("test-sum-1", "test", "10")]
    # the source file travels with the package: it is served where the folder it came from is gone
    assert (installed / "src" / "arith_ors.py").read_text() == FIXTURE.read_text()


def test_bad_input_is_one_line_naming_the_fix_and_writes_nothing(tmp_path: Path, source: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_import_verifiers.ors_generate import generate_ors
    from openenv_import_verifiers.ors_source import OrsImportError

    (source.parent / "plain.py").write_text("from openreward.environments import Environment\n\nX = 1\n")
    (source.parent / "two.py").write_text(FIXTURE.read_text() + "\n\nclass OtherEnv(ArithEnv):\n    pass\n")
    monkeypatch.setattr(sys, "path", list(sys.path))  # resolve() puts the source's folder on it
    for name in ("plain", "two", "arith_ors"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    cases = {
        f"{source.parent / 'plain.py'}": "defines no ORS Environment subclass",
        f"{tmp_path / 'missing.py'}": "does not exist: give an ORS environment's .py file",
        f"{source.parent}": "is a folder but not a Python package (no __init__.py): give the .py file",
        f"{source.parent / 'two.py'}": "defines 2 ORS Environment subclasses (ArithEnv, OtherEnv): pick one",
        f"{source}:ArithEnvv": "no ORS Environment subclass 'ArithEnvv'. Did you mean 'ArithEnv'?",
        "no_such_ors_module": "no module named 'no_such_ors_module'",
        "not a module": "neither a path that exists nor a Python module name",
    }
    for target, message in cases.items():
        with pytest.raises(OrsImportError, match=re.escape(message)):
            generate_ors(target, tmp_path / "out")
    with pytest.raises(OrsImportError, match=re.escape("--reward-range 1.0,0.0 is not a range")):
        generate_ors(str(source), tmp_path / "out", reward_range=(1.0, 0.0))
    assert not (tmp_path / "out").exists()
    # two classes: naming one imports it
    generate_ors(f"{source.parent / 'two.py'}:OtherEnv", tmp_path / "out", name="other")
    assert 'ors_class = "OtherEnv"' in (tmp_path / "out" / "src" / "openenv_ors_other" / "env.py").read_text()
    # the command: one `error:` line, exit 2; an existing folder is kept unless --force
    done = _openenv("import", f"ors:{source}", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "already exists: pick another -o, or pass --force" in line


def test_without_openreward_the_command_says_what_to_install(tmp_path: Path, source: Path) -> None:
    # openreward is installed here: hide it from the command's process (a None entry in
    # sys.modules makes its import fail as if it were absent)
    code = ("import sys, runpy; sys.modules['openreward'] = None; "
            f"sys.argv = ['openenv', 'import', {f'ors:{source}'!r}, '-o', 'out']; "
            "runpy.run_module('openenv', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert re.match(r"error: openreward is not installed here .*`pip install 'openreward>=0\.1\.167,<0\.2'`", line)
    assert not (tmp_path / "out").exists()
