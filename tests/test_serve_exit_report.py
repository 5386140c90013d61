"""An env that ends the server process leaves a line naming its session and env (issue 21, item 12)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from websockets.sync.client import connect

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

ENV = textwrap.dedent('''
    import os
    from openenv.env import Environment
    from openenv.types import Action, Observation, State

    class ExitingEnv(Environment[Action, Observation, State]):
        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, **kw):
            os._exit(7)

        @property
        def state(self):
            return State()
''')


def serve_and_step(cli_env: dict[str, str], tmp_path: Path, module: str, source: str, cls: str) -> tuple[int, str]:
    """Serve ``module:cls`` (written from ``source``), reset and step it once over ``/ws``, and
    wait for the server process to end: (its exit status, its log)."""
    from openenv.testing import wait_until

    (tmp_path / f"{module}.py").write_text(source)
    ready, log_path = tmp_path / "ready.json", tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", f"{module}:{cls}", "--port", "0",
         "--ready-file", str(ready), "--transport", "ws"],
        cwd=tmp_path, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=cli_env,  # noqa: SIM115
        start_new_session=True)
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, log_path.read_text()
        with connect(f"ws://127.0.0.1:{info['port']}/ws", open_timeout=10, proxy=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            ws.send('{"type":"step","data":{}}')
            status = proc.wait(timeout=20)
    except Exception:
        if proc.poll() is None:
            proc.kill()
        raise
    return status, log_path.read_text()


def test_os_exit_in_an_env_is_logged_with_session_and_env(cli_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status, log = serve_and_step(cli_env, tmp_path, "exiting_env", ENV, "ExitingEnv")
    assert status == 7
    line = next((ln for ln in log.splitlines() if "os._exit(7)" in ln), "")
    # The env runs on its session's own thread, named after the session id.
    assert "on thread openenv-session-" in line and "(env ExitingEnv)" in line, log
    assert "exiting_env.py" in line and "in step" in line, log


SEGFAULT_ENV = textwrap.dedent('''
    import ctypes
    from openenv.env import Environment
    from openenv.types import Action, Observation, State

    class CrashingEnv(Environment[Action, Observation, State]):
        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, **kw):
            ctypes.string_at(0)  # a segfault, as a broken C extension would cause

        @property
        def state(self):
            return State()
''')


def test_a_segfault_in_an_env_names_its_session_and_env(cli_env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # faulthandler's dump shows function names, not thread names: the env thread's bottom frame is
    # named after the session and env, so the crash report says which one did it.
    status, log = serve_and_step(cli_env, tmp_path, "crashing_env", SEGFAULT_ENV, "CrashingEnv")
    assert status == -11
    assert "Segmentation fault" in log, log
    crashed = log[log.index("Segmentation fault"):]
    current = crashed[crashed.index("Current thread"):].split("\n\n")[0]
    assert "_env_CrashingEnv" in current and "openenv_session_" in current, current
    assert "crashing_env.py" in current and "in step" in current, current
