"""``openenv import verifiers:<module>`` on an index environment written for verifiers' old API.

staros-stardata 0.1.1 (from the index) ships ``stardata.envs.constraint_gym``: a module whose
``load_environment(**kwargs)`` returns a ``vf.SingleTurnEnv`` over a dataset it builds in code (one
constrained-poem prompt per form and topic) with a ``vf.Rubric`` of a deterministic prosody/Oulipo
reward (weight 1) and a metric function (weight 0). It is imported with ``--arg`` options for its
``load_environment``, the package is installed into this venv, ``openenv serve`` serves it as a real
process, and a scripted policy plays one task with a reply that meets the constraint and one with a
reply that does not: each reward is the env's own rubric's (checked against the package's reward
function called directly), the good one above the bad one. ``openenv validate`` passes. Bad input
(a multi-turn env, a ``load_environment`` that raises, a dataset from the unreachable Hub, a bad
``--arg``) is one ``error:`` line that writes nothing. Runs in ``nox -s verifiers_legacy`` (verifiers
0.1.9.post3: the old API); skipped where that verifiers is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

pytest.importorskip("verifiers.envs.singleturn_env", reason="needs verifiers 0.1 (nox -s verifiers_legacy)")
pytest.importorskip("stardata.envs.constraint_gym", reason="needs staros-stardata (nox -s verifiers_legacy)")

from stardata.envs import constraint_gym as gym

from openenv.client import GenericEnvClient

MODULE = "stardata.envs.constraint_gym"
ARGS = ["--arg", 'forms=["lipogram", "acrostic"]', "--arg", "topics_per_form=2"]
# A lipogram in "e" (the form's default letter): no e anywhere, several lines, no repeats.
GOOD = "Cold night on a rail car\nFrost paints a glassy scroll\nA quiet town looks on\nMoon drifts past a hill"
BAD = "The evening freezes every pane\nThe sleeper sees the frozen plain"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "PYTHONPATH")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")  # the Hub is not reachable here: fail fast
    return env


def _openenv(*args: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = _env()
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd, env=env)


@pytest.fixture
def installed(tmp_path: Path, install_generated: Callable[[Path, str], Path]) -> Path:
    """The imported package, installed into this venv (uninstalled after)."""
    done = _openenv("import", f"verifiers:{MODULE}", "-o", str(tmp_path / "pkg"), "--name", "stardata_gym", *ARGS,
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "train 3, test 1" in done.stdout, done.stdout
    # verifiers, staros-stardata, the kernel and this plugin are already here
    return install_generated(tmp_path / "pkg", "openenv-vf-stardata-gym")


@pytest.fixture
def served(installed: Path, serve_installed: Callable[..., AbstractContextManager[str]]) -> Iterator[str]:
    with serve_installed("stardata_gym", timeout_s=90, env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}) as url:
        yield url


def test_the_package_is_written_from_the_env(installed: Path) -> None:
    pkg = installed / "src" / "openenv_vf_stardata_gym"
    rows = [json.loads(line) for line in (pkg / "tasks.jsonl").read_text().splitlines()]
    # load_environment(forms=[...], topics_per_form=2): 2 lipogram and 2 acrostic rows; the env has no
    # eval_dataset, so its last row is the test split
    assert [(r["id"], r["split"], r["data"]["info"]["form"]) for r in rows] == [
        ("train-0", "train", "lipogram"), ("train-1", "train", "lipogram"), ("train-2", "train", "acrostic"),
        ("test-0", "test", "acrostic")]
    # the row as verifiers formatted it: the env's prompt (text here), answer and info
    assert "NEVER uses the letter 'e'" in rows[0]["data"]["prompt"]
    assert rows[0]["data"]["info"]["spec"]["lipogram"] == "e"
    pyproject = (installed / "pyproject.toml").read_text()
    assert '"verifiers==0.1.9.post3"' in pyproject and '"staros-stardata"' in pyproject
    env_py = (pkg / "env.py").read_text()
    assert 'env_module = "stardata.envs.constraint_gym"' in env_py and "topics_per_form" in env_py
    manifest = (pkg / "openenv.yaml").read_text()
    assert "reward_range: [0.0, 1.0]" in manifest and "rubric: verifiers_rewards" in manifest


def test_an_index_env_is_served_and_scored_by_its_own_rubric(served: str, installed: Path) -> None:
    rows = [json.loads(line) for line in
            (installed / "src" / "openenv_vf_stardata_gym" / "tasks.jsonl").read_text().splitlines()]
    info = rows[0]["data"]["info"]
    # what the env's rubric gives each reply: the package's own reward function, called directly
    expected = {text: gym.prosody_reward(completion=[{"role": "assistant", "content": text}], info=info)
                for text in (GOOD, BAD)}
    assert expected[GOOD] > expected[BAD]
    with GenericEnvClient(served).sync() as client:
        shown = client.reset(task_id="train-0")
        assert shown.observation["prompt"] == rows[0]["data"]["prompt"] == shown.observation["prompt_text"]
        good = client.step({"completion": GOOD})
        assert good.done and good.reward == pytest.approx(expected[GOOD]) and good.reward > 0
        assert good.observation["rewards"] == {"prosody_reward": pytest.approx(expected[GOOD])}
        assert good.reward_components["verifiers_rewards.prosody_reward"] == pytest.approx(expected[GOOD])

        client.reset(task_id="train-1")
        bad = client.step({"completion": BAD})
        assert bad.done and bad.reward == pytest.approx(expected[BAD]) and bad.reward < good.reward
        # the server keeps serving after a bad step
        with pytest.raises(Exception, match="reset"):
            client.step({"completion": GOOD})
        again = client.reset(split="test")
        assert again.observation["task_id"] == "test-0"


def test_the_imported_env_passes_openenv_validate(tmp_path: Path, installed: Path) -> None:
    done = _openenv("validate", "stardata_gym", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] not in ("pass", "n/a")]
    assert report["ok"] and not failed, failed


BAD_MODULES = {
    "vf_tool_env": '''
from datasets import Dataset
import verifiers as vf


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def load_environment():
    rows = Dataset.from_list([{"question": "2+2?", "answer": "4"}])
    return vf.ToolEnv(dataset=rows, tools=[add], rubric=vf.Rubric(funcs=[lambda completion: 1.0]))
''',
    "vf_raises": '''
def load_environment(**kwargs):
    raise RuntimeError("set JUDGE_API_KEY to load this env")
''',
    "vf_hub": '''
import verifiers as vf
from datasets import load_dataset


def load_environment():
    return vf.SingleTurnEnv(dataset=load_dataset("openai/gsm8k", "main", split="train"))
''',
}


@pytest.mark.parametrize(("module", "args", "message"), [
    ("vf_tool_env", [], "returned a ToolEnv, a multi-turn verifiers env"),
    ("vf_raises", ["--arg", "n=3"], "vf_raises.load_environment(n=3) failed: RuntimeError: set JUDGE_API_KEY"),
    ("vf_hub", [], "which is not reachable from here"),
    ("vf_raises", ["--arg", "n"], "--arg 'n' is not KEY=VALUE"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, module: str, args: list[str],
                                                  message: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name, text in BAD_MODULES.items():
        (src / f"{name}.py").write_text(textwrap.dedent(text))
    done = _openenv("import", f"verifiers:{module}", "-o", "out", *args, cwd=tmp_path, pythonpath=src)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # nothing written, not even a temp folder
