"""The Jupyter env: a persistent kernel, rich outputs, interrupts, deaths, reaping, tasks and grading."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from openenv.errors import ValidationError
from openenv.tasks import tasks_of
from openenv.testing import EnvContract, check_registered, exec_snippet, readme_snippets
from openenv_env_jupyter import JupyterAction, JupyterEnv, JupyterObservation, KernelLimits, solve
from openenv_env_jupyter.tasks import grade, make_problem

README = Path(__file__).resolve().parents[1] / "README.md"
# A 1x1 PNG, displayed by the kernel through IPython.display.
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def run(env: JupyterEnv, code: str, timeout_s: float = 10.0) -> JupyterObservation:
    return env.step(JupyterAction(kind="execute", code=code, timeout_s=timeout_s))


def err(obs: JupyterObservation) -> dict[str, Any]:
    assert obs.error is not None, obs
    return obs.error


@pytest.fixture(scope="module")
def env() -> Iterator[JupyterEnv]:
    made = JupyterEnv(limits=KernelLimits(interrupt_grace_s=1.0))
    made.reset(kind="free", max_steps=1000)
    yield made
    made.close()


def test_state_persists_between_steps_without_rerunning_history(env: JupyterEnv) -> None:
    first = run(env, "import math\ncounter = 0\ndef bump():\n    global counter\n    counter += 1\n    return counter\n"
                     "bump()")
    again = run(env, "open('notes.txt', 'w').write('kept'); bump(), math.pi > 3")
    # bump() ran once per cell: the first cell was not run again.
    assert first.result == "1" and again.result == "(2, True)"
    assert first.execution_count is not None and again.execution_count == first.execution_count + 1
    assert "notes.txt" in again.files and run(env, "print(open('notes.txt').read())").stdout == "kept\n"


def test_outputs_errors_and_images_come_back(env: JupyterEnv) -> None:
    obs = run(env, "import sys\nprint('out'); print('err', file=sys.stderr)\n"
                   "from IPython.display import Image, display\nimport base64\n"
                   f"display(Image(data=base64.b64decode('{PNG_B64}')))\n"
                   "42")
    assert obs.status == "ok" and obs.stdout == "out\n" and obs.stderr == "err\n" and obs.result == "42"
    assert {"image/png": f"data:image/png;base64,{PNG_B64}"}.items() <= obs.displays[0].items()
    bad = run(env, "def f():\n    return 1 / 0\nf()")
    assert bad.status == "error" and err(bad)["ename"] == "ZeroDivisionError"
    assert any("return 1 / 0" in line for line in err(bad)["traceback"])
    assert not any("\x1b[" in line for line in err(bad)["traceback"])


def test_a_timeout_interrupts_and_the_kernel_keeps_its_state(env: JupyterEnv) -> None:
    run(env, "kept = 'yes'")
    obs = run(env, "import time\nfor _ in range(100):\n    time.sleep(0.5)", timeout_s=1.0)
    assert obs.status == "timeout" and err(obs)["ename"] == "KeyboardInterrupt"
    assert run(env, "kept").result == "'yes'"
    # A cell that ignores SIGINT is ended by a new kernel; the session goes on.
    ignore = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
    stubborn = run(env, ignore, timeout_s=0.5)
    assert stubborn.status == "restarted" and "state is lost" in stubborn.stderr
    assert err(run(env, "kept"))["ename"] == "NameError"


def test_memory_limit_and_a_dying_kernel(env: JupyterEnv) -> None:
    run(env, "before = 1")
    big = run(env, "blob = bytearray(8 * 1024**3)")
    assert err(big)["ename"] == "MemoryError"
    assert run(env, "before").result == "1"
    pid = env.state.kernel_pid
    died = run(env, "import os; os._exit(3)")
    assert died.status == "restarted" and "died" in died.stderr
    assert env.state.kernel_pid != pid and run(env, "1 + 1").result == "2"
    assert env.step(JupyterAction(kind="restart")).status == "restarted"


def test_no_network_inside_the_kernel(env: JupyterEnv) -> None:
    if not env.state.network.startswith("none"):
        pytest.skip(f"this OS refuses a new network namespace: {env.state.network}")
    obs = run(env, "import socket\nprint(sorted(name for _, name in socket.if_nameindex()))")
    assert obs.stdout.strip() == "['lo']"
    assert socket.if_nameindex() != [(1, "lo")]  # the host has more: the namespace is the kernel's own


def test_close_reaps_the_kernel_and_everything_it_started() -> None:
    env = JupyterEnv()
    env.reset(kind="free")
    pid = env.state.kernel_pid
    assert pid is not None
    obs = run(env, "import subprocess, os\nkids = [subprocess.Popen(['sleep', '120']).pid for _ in range(2)]\n"
                   "if os.fork() == 0:\n    import time; time.sleep(120)\nprint(kids)")
    group = [p for p in psutil.process_iter(["pid"]) if _pgid(p.pid) == pid]
    assert len(group) >= 4, (obs, group)  # the kernel, two sleeps and the fork
    env.close()
    left = [p.pid for p in psutil.process_iter() if _pgid(p.pid) == pid and p.status() != psutil.STATUS_ZOMBIE]
    assert left == []


def test_an_env_dropped_without_close_leaves_no_kernel_or_folder() -> None:
    import gc

    env = JupyterEnv()
    env.reset(kind="word_count", seed=1)
    pid, folder = env.state.kernel_pid, env._folder
    assert pid is not None and folder is not None and folder.is_dir()
    del env
    gc.collect()
    assert not psutil.pid_exists(pid) and not folder.exists()


def _pgid(pid: int) -> int | None:
    import os

    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_tasks_grading_and_the_oracle() -> None:
    source = tasks_of(JupyterEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 100, "test": 40}
    train = {(t.data["kind"], t.seed) for t in source.task_range("train")}
    assert not train & {(t.data["kind"], t.seed) for t in source.task_range("test")}
    problem = make_problem("mean_units", 3)
    assert problem == make_problem("mean_units", 3) and problem != make_problem("mean_units", 4)
    assert grade(problem, problem.answer) == (1.0, "correct") and grade(problem, "nope")[0] == 0.0
    env = JupyterEnv()
    try:
        # One task through the kernel here (each reset starts a kernel); every kind's oracle is
        # played by `openenv validate jupyter` and tests/test_env_tasks.py.
        for task_id in ("word_count-test-1000003",):
            obs = env.reset(task=source.get(task_id))
            assert obs.question and env.state.task_id == task_id
            # The answer is graded here, never written where the kernel could read it.
            assert all(problem.answer not in name for name in obs.files)
            while not obs.done:
                obs = env.step(JupyterAction(**solve(obs)))
            assert obs.reward == 1.0 and obs.metadata["grade"] == "correct"
        obs = env.reset(seed=5, kind="count_primes")
        wrong = env.step(JupyterAction(kind="submit", answer="-1"))
        assert wrong.reward == 0.0 and wrong.done
        with pytest.raises(ValidationError, match="call reset"):
            env.step(JupyterAction(kind="execute", code="1"))
    finally:
        env.close()


def test_bad_input_is_refused_and_the_session_goes_on() -> None:
    env = JupyterEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(JupyterAction(code="1"))
    with pytest.raises(ValidationError, match="did you mean 'word_count'"):
        env.reset(kind="word_cont")
    with pytest.raises(ValidationError, match="max_steps"):
        env.reset(max_steps=0)
    try:
        env.reset(kind="free", max_steps=2)
        with pytest.raises(ValidationError, match="no task") as info:
            env.step(JupyterAction(kind="submit", answer="3"))
        assert info.value.errors[0]["type"] == "no_task"
        assert run(env, "print('still here')").stdout == "still here\n"
        last = run(env, "1")
        assert last.done and last.truncated
    finally:
        env.close()
    with pytest.raises(ValueError):
        JupyterAction(kind="execute", code="1", timeout_s=0)


def test_keeps_the_kit_env_contract() -> None:
    # In-process here (each session starts a kernel, ~1 s); the integration suite runs it served too.
    EnvContract(JupyterEnv, valid_actions=[{"code": "x = 1"}, {"code": "print(x)"}], served=False).run()


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    exec_snippet(blocks[0], filename=README)


def test_plugin_registration() -> None:
    from openenv_env_jupyter import plugin

    entry, _ = check_registered(plugin, "jupyter", "openenv_env_jupyter.env:JupyterEnv")
    assert entry.load() is JupyterEnv
