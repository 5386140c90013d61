"""``openenv serve`` of an env without generic parameters: annotated ones are served with their types,
unannotated ones are refused at start-up with one line naming the fix (no traceback)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.errors import ValidationError
from openenv.testing import restore_default_signals

ENV_SOURCE = """
    from openenv.env import Environment
    from openenv.types import Action, Observation, State


    class Guess(Action):
        number: int


    class Hint(Observation):
        hint: str = ""


    class Annotated(Environment):
        def reset(self, seed=None, episode_id=None, **kw) -> Hint:
            return Hint(hint="start")

        def step(self, action: Guess, timeout_s=None, **kw) -> Hint:
            return Hint(hint="higher" if action.number < 7 else "done", done=action.number >= 7,
                        reward=1.0 if action.number == 7 else 0.0)

        @property
        def state(self) -> State:
            return State()


    class Untyped(Environment):
        def reset(self, seed=None, episode_id=None, **kw):
            return Observation()

        def step(self, action, timeout_s=None, **kw):
            return Observation()

        @property
        def state(self):
            return State()
"""


def test_an_annotated_env_is_served_with_its_types(
    cli_env: dict[str, str], tmp_path: Path, wait_until: Callable[..., Any]
) -> None:
    from openenv.client import SyncEnvClient

    (tmp_path / "typed_envs_mod.py").write_text(textwrap.dedent(ENV_SOURCE))
    ready = tmp_path / "ready.json"
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", "typed_envs_mod:Annotated", "--port", "0",
             "--ready-file", str(ready), "--log-level", "warning"],
            stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            preexec_fn=restore_default_signals,
            env={**cli_env, "PYTHONPATH": str(tmp_path)},
        )
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, (tmp_path / "serve.log").read_text()
        url = f"http://127.0.0.1:{info['port']}"
        schema = httpx.get(f"{url}/schema", timeout=10).json()
        assert "number" in schema["action"]["properties"]
        assert "hint" in schema["observation"]["properties"]
        with SyncEnvClient(url) as env:
            assert env.reset().observation["hint"] == "start"
            with pytest.raises(ValidationError):  # validated against Guess, not the bare Action
                env.step({"guess": 7})
            result = env.step({"number": 7})
            assert result.done and result.reward == 1.0 and result.observation["hint"] == "done"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_an_untyped_env_is_refused_at_start_up_naming_the_fix(
    openenv_cli: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    (tmp_path / "typed_envs_mod.py").write_text(textwrap.dedent(ENV_SOURCE))
    out = openenv_cli("serve", "typed_envs_mod:Untyped", "--port", "0", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 2, out.stderr
    assert "Environment 'Untyped' declares no action type" in out.stderr
    assert "class Untyped(Environment[MyAction, MyObservation, State])" in out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("error:") == 1
