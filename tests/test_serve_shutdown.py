"""Shutdown is bounded whatever the env is doing (issue 21, item 8)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

from openenv.testing import restore_default_signals

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

ENV = textwrap.dedent('''
    import time
    from openenv.env import Environment
    from openenv.types import Action, Observation, State

    class Say(Action):
        message: str = "ok"

    class HungEnv(Environment[Say, Observation, State]):
        THREAD_AFFINITY = AFFINE

        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, **kw):
            time.sleep(3600)  # hangs: not even a step timeout ends it

        @property
        def state(self):
            return State()

        def close(self):
            time.sleep(3600)
''')


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("affine", [False, True], ids=["own-thread", "thread-affine"])
def test_a_hung_env_never_holds_the_shutdown(cli_env, tmp_path: Path, wait_until, sig: int, affine: bool) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "hung_env.py").write_text(ENV.replace("AFFINE", str(affine)))
    ready, log_path = tmp_path / "ready.json", tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", "hung_env:HungEnv", "--port", "0", "--ready-file",
         str(ready), "--transport", "ws"],
        cwd=tmp_path, stdout=open(log_path, "w"), stderr=subprocess.STDOUT, env=cli_env,  # noqa: SIM115
        start_new_session=True, preexec_fn=restore_default_signals)
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, log_path.read_text()
        with connect(f"ws://127.0.0.1:{info['port']}/ws", open_timeout=10, proxy=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            ws.send('{"type":"step","data":{"message":"x"}}')  # never answered
            time.sleep(0.3)
            started = time.monotonic()
            proc.send_signal(sig)
            code = proc.wait(timeout=30)  # bounded: graceful phase, close grace, then forced exit
        assert time.monotonic() - started < 25
        assert code in (-sig, 128 + sig, 0), code
        log = log_path.read_text()
        assert "abandoned its env without close()" in log or "exiting anyway" in log, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


INLINE = textwrap.dedent('''
    import logging, sys, time
    from openenv.env import Environment
    from openenv.serving import serve
    from openenv.types import Action, Observation, State

    class Say(Action):
        message: str = "ok"

    class LoopBlocker(Environment[Say, Observation, State]):
        BLOCKING = False  # runs inline: this step blocks the event loop itself

        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, **kw):
            time.sleep(3600)

        @property
        def state(self):
            return State()

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    serve(LoopBlocker, port=0, transports=["ws"], shutdown_timeout_s=2, ready_file=sys.argv[1])
''')


def test_an_env_blocking_the_event_loop_still_gets_a_forced_exit(cli_env, tmp_path: Path, wait_until) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "blocker.py").write_text(INLINE)
    ready, log_path = tmp_path / "ready.json", tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "blocker.py", str(ready)], cwd=tmp_path, stdout=open(log_path, "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT, env=cli_env, start_new_session=True)
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, log_path.read_text()
        with connect(f"ws://127.0.0.1:{info['port']}/ws", open_timeout=10, proxy=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            ws.send('{"type":"step","data":{"message":"x"}}')  # the loop is blocked from here on
            time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pytest.fail(f"still running 15 s after SIGTERM:\n{log_path.read_text()}")
        assert time.monotonic() - started < 8  # the 2 s bound, plus start-up slack
        assert code == 128 + signal.SIGTERM, code
        log = log_path.read_text()
        assert "did not finish within 2 s; exiting anyway. Abandoned: session" in log, log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
