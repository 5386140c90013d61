"""Shared helpers of the local provider tests (a uniquely named module, not ``conftest``, so
that importing it never picks up another package's conftest)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv.interfaces import LaunchSpec
from openenv.testing import wait_until
from openenv_provider_local.process import descendants, group_members

__all__ = ["HELPERS", "TINY", "descendants", "group_alive", "kill_server", "needs_ws", "spec",
           "start_orphan", "wait_until"]

HELPERS = Path(__file__).parent / "helpers"
#: A dependency-free env importable through PYTHONPATH=HELPERS.
TINY = "tiny_env:TinyEnv"

#: Serving needs a transport, and the round-trips need its client connector.
needs_ws = pytest.mark.requires_plugins("transport-ws")


def group_alive(pgid: int) -> list[int]:
    """Live members of process group ``pgid``."""
    return group_members(pgid)


def spec(env: str = TINY, helpers: bool = True, **kw: Any) -> LaunchSpec:
    """A launch spec whose server can import the helper env modules."""
    env_vars = kw.pop("env_vars", {})
    if helpers:
        env_vars = {"PYTHONPATH": str(HELPERS), **env_vars}
    return LaunchSpec(env=env, env_vars=env_vars, **kw)


def kill_server(handle: Any) -> None:
    """SIGKILL a server's whole process group behind its provider's back."""
    os.killpg(handle.pgid, signal.SIGKILL)


def start_orphan(provider_name: str, env: str = TINY, detach: bool = True) -> tuple[str, int]:
    """Start a server from a helper process that then SIGKILLs itself; returns (id, pgid)."""
    out = subprocess.run(
        [sys.executable, str(HELPERS / "start_and_die.py"), provider_name, env, str(HELPERS)],
        capture_output=True, text=True, timeout=180,
        env={**os.environ, "DETACH": "1" if detach else "0"},
    )
    assert out.returncode == -signal.SIGKILL, out.stderr
    server_id, pgid = out.stdout.split()
    return server_id, int(pgid)


