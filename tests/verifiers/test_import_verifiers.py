"""``openenv import verifiers:<module>`` end to end: a verifiers 0.4 taskset (written here, an
arithmetic taskset with an exact-answer ``@vf.reward`` and a ``@vf.metric``) is imported into an env
package, the package is installed into this venv, ``openenv serve`` serves it as a real process, and
a scripted policy plays one task with the right answer (reward 1.0) and one with a wrong answer
(0.0), as verifiers' own scoring says, with its named rewards as the reply's reward components. Bad
input gets one ``error:`` line and writes nothing. Runs in ``nox -s verifiers``; skipped where
verifiers is not installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="needs verifiers (nox -s verifiers)")

from openenv.client import GenericEnvClient

TASKSET = '''
from __future__ import annotations

import verifiers.v1 as vf


class ArithData(vf.TaskData):
    answer: str


class ArithTask(vf.Task[ArithData, vf.State]):
    @vf.reward(weight=1.0)
    async def exact(self, task: ArithData, trace: vf.Trace) -> float:
        return 1.0 if trace.last_reply.strip() == task.answer else 0.0

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class ArithTaskset(vf.Taskset[ArithTask]):
    def load(self):
        for i, (a, b) in enumerate([(2, 2), (3, 4), (10, 7), (6, 6), (9, 1)]):
            yield ArithTask(ArithData(id=f"sum-{i}", prompt=f"What is {a}+{b}? Reply with the number.",
                                      answer=str(a + b)), self.config.task)


__all__ = ["ArithTaskset"]
'''
ANSWERS = {"sum-0": "4", "sum-1": "7", "sum-2": "17", "sum-3": "12", "sum-4": "10"}


def _openenv(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "PYTHONPATH")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


@pytest.fixture
def taskset_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "vf_arith_ci").mkdir(parents=True)
    (src / "vf_arith_ci" / "__init__.py").write_text(textwrap.dedent(TASKSET))
    return src


@pytest.fixture
def installed(tmp_path: Path, taskset_dir: Path, install_generated: Callable[[Path, str], Path]) -> Path:
    """The imported package, installed into this venv (uninstalled after)."""
    done = _openenv("import", "verifiers:vf_arith_ci", "-o", str(tmp_path / "pkg"), cwd=tmp_path,
                    pythonpath=taskset_dir)
    assert done.returncode == 0, done.stderr
    assert "train 4, test 1" in done.stdout
    # verifiers, the kernel and this plugin are already here (and the index is not needed)
    return install_generated(tmp_path / "pkg", "openenv-vf-vf-arith-ci")


@pytest.fixture
def served(installed: Path, serve_installed: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    # From an empty folder and without PYTHONPATH: the taskset module must come from the package
    with serve_installed("vf_arith_ci") as url:
        yield url


def test_an_imported_taskset_is_served_and_scored_by_its_verifiers_rewards(served: str) -> None:
    with GenericEnvClient(served).sync() as client:
        right = client.reset(task_id="sum-1")
        assert right.observation["prompt_text"] == "What is 3+4? Reply with the number."
        result = client.step({"completion": ANSWERS["sum-1"]})
        assert result.done and result.reward == 1.0
        assert result.observation["rewards"] == {"exact": 1.0}
        assert result.observation["metrics"] == {"reply_chars": 1.0}
        # the manifest's rubric (verifiers_rewards) puts them on the wire as reward components
        assert result.reward_components == {"verifiers_rewards": 1.0, "verifiers_rewards.exact": 1.0}

        client.reset(task_id="sum-4")  # the test split's task
        wrong = client.step({"completion": "11"})
        assert wrong.done and wrong.reward == 0.0
        assert wrong.observation["rewards"] == {"exact": 0.0}
        assert wrong.reward_components == {"verifiers_rewards": 0.0, "verifiers_rewards.exact": 0.0}
        # the server keeps serving after a bad step
        with pytest.raises(Exception, match="reset"):
            client.step({"completion": "10"})
        again = client.reset(split="test")
        assert again.observation["task_id"] == "sum-4"


def test_the_imported_env_passes_openenv_validate(tmp_path: Path, installed: Path) -> None:
    # the kernel's own checks: manifest (reward_range from the rewards' weights), tasks, seeded
    # resets, out-of-order steps refused, parallel sessions, close
    done = _openenv("validate", "vf_arith_ci", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] not in ("pass", "n/a")]
    assert report["ok"] and not failed, failed
    manifest = (installed / "src" / "openenv_vf_vf_arith_ci" / "openenv.yaml").read_text()
    assert "reward_range: [0.0, 1.0]" in manifest and "rubric: verifiers_rewards" in manifest


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, taskset_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_import_verifiers.generate import generate
    from openenv_import_verifiers.taskset import VerifiersImportError

    (taskset_dir / "legacy_env.py").write_text("def load_environment():\n    return None\n")
    (taskset_dir / "no_prompt.py").write_text(TASKSET.replace('prompt=f"What is {a}+{b}? Reply with the number.",',
                                                              ""))
    (tmp_path / "taken").mkdir()
    monkeypatch.syspath_prepend(str(taskset_dir))
    cases = {
        "verifiers:vf_arith_cj": "no module named 'vf_arith_cj'",
        "verifiers:legacy_env": "old load_environment() API",
        "verifiers:json": "exports no verifiers Taskset subclass",
        "verifiers:no_prompt": "has no prompt",
        "ors:thing": "give verifiers:<module>",
    }
    for source, message in cases.items():
        with pytest.raises(VerifiersImportError, match=re.escape(message)):
            generate(source, tmp_path / "out")
    with pytest.raises(VerifiersImportError, match="already exists: pick another -o, or pass --force"):
        generate("verifiers:vf_arith_ci", tmp_path / "taken")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "taken"]  # nothing half-written
    assert not any((tmp_path / "taken").iterdir())
    # the command: one `error:` line, exit 2
    done = _openenv("import", "verifiers:legacy_env", "-o", "out", cwd=tmp_path, pythonpath=taskset_dir)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: module 'legacy_env' has verifiers' old load_environment() API")
    assert "pip install 'verifiers==0.1.9.post3'" in line  # the verifiers that runs it (nox -s verifiers_legacy)
    assert not (tmp_path / "out").exists()
    generate("verifiers:vf_arith_ci", tmp_path / "taken", force=True)
    assert (tmp_path / "taken" / "src" / "openenv_vf_vf_arith_ci" / "tasks.jsonl").read_text().count("\n") == 5


def test_a_single_file_taskset_is_copied_into_the_package(tmp_path: Path, taskset_dir: Path) -> None:
    (taskset_dir / "arith_file.py").write_text(textwrap.dedent(TASKSET))
    done = _openenv("import", "verifiers:arith_file", "-o", "pkg", "--name", "arith", "--test-fraction", "0.4",
                    cwd=tmp_path, pythonpath=taskset_dir)
    assert done.returncode == 0, done.stderr
    assert "train 3, test 2" in done.stdout
    pkg = tmp_path / "pkg"
    assert (pkg / "src" / "arith_file.py").read_text() == (taskset_dir / "arith_file.py").read_text()
    pyproject = (pkg / "pyproject.toml").read_text()
    assert '"src/arith_file.py" = "arith_file.py"' in pyproject and 'arith = "openenv_vf_arith.plugin"' in pyproject
    rows = [json.loads(line) for line in (pkg / "src" / "openenv_vf_arith" / "tasks.jsonl").read_text().splitlines()]
    assert [(r["id"], r["split"], r["data"]["answer"]) for r in rows] == [
        ("sum-0", "train", "4"), ("sum-1", "train", "7"), ("sum-2", "train", "17"), ("sum-3", "test", "12"),
        ("sum-4", "test", "10")]
