"""A server started by a provider dies with it, whatever its env is doing (issue 21, item 9)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from openenv.cli.serve_cmd import DIE_WITH_PARENT_ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

ENV = textwrap.dedent('''
    import signal, time
    from openenv.env import Environment
    from openenv.types import Action, Observation, State

    class HungEnv(Environment[Action, Observation, State]):
        THREAD_AFFINITY = True

        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, **kw):
            time.sleep(3600)

        @property
        def state(self):
            return State()
''')

# The "provider": starts the server as the local provider does, then waits forever.
PARENT = textwrap.dedent('''
    import subprocess, sys, time
    proc = subprocess.Popen(sys.argv[1:])
    print(proc.pid, flush=True)
    time.sleep(3600)
''')


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_kill_9_of_the_parent_takes_a_hung_server_down(cli_env, tmp_path: Path, wait_until) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "hung_env.py").write_text(ENV)
    ready = tmp_path / "ready.json"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, sys.executable, "-m", "openenv", "serve", "hung_env:HungEnv",
         "--port", "0", "--ready-file", str(ready), "--transport", "ws"],
        cwd=tmp_path, stdout=subprocess.PIPE, text=True, env={**cli_env, DIE_WITH_PARENT_ENV: "1"},
        start_new_session=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info
        with connect(f"ws://127.0.0.1:{info['port']}/ws", open_timeout=10, proxy=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            ws.send('{"type":"step","data":{}}')  # hangs in the env's own thread
            time.sleep(0.3)
            parent.kill()  # kill -9: no chance to stop its child
            parent.wait()
            started = time.monotonic()
            assert wait_until(lambda: not alive(child), timeout_s=20), "the orphaned server is still alive"
            assert time.monotonic() - started < 12
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
