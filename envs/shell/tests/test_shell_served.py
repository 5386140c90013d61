"""The shell env served over real sockets: a hostile session leaves the server and another session
healthy; closing the sessions deletes their trees and leaves no sandboxed process behind."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.client import GenericEnvClient
from openenv.plugins import PluginManager
from openenv.testing import live_server, wait_until
from openenv_sandbox import default_sandbox
from openenv_sandbox.host import processes_of

pytestmark = [pytest.mark.requires_plugins("transport-ws"),
              pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")]


def _slot_uids() -> range:
    """The uids of the served env's sandbox: the server runs in this process (live_server), so it
    is this process's default_sandbox(), whose uids are leased on this host for it alone."""
    uids = default_sandbox().uids
    assert uids is not None
    return uids


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    from openenv_transport_ws import plugin as ws

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(ws)
    with live_server("openenv_env_shell.env:ShellEnv", transports=["ws"], plugin_manager=pm, max_sessions=4) as srv:
        yield srv.url


async def _play(base: str) -> tuple[list[dict], list[str]]:
    hostile_cmds = [
        f"kill -9 {os.getpid()}; kill -9 $PPID; echo survived",
        "(setsid sleep 600 &); nohup sleep 600 >/dev/null 2>&1 & echo started",
        # bounded on purpose: a recursive delete of / would also reach other users' world-writable dirs
        "rm -f /etc/hostname; rm -rf {other_tree} ..; ls -d /etc/hostname {other_tree} 2>&1",
        f"cat /proc/1/environ /proc/{os.getpid()}/environ 2>&1 | head -c 300",
    ]
    seen: list[dict] = []
    trees: list[str] = []
    async with GenericEnvClient(base) as hostile, GenericEnvClient(base) as other:
        trees.append((await hostile.reset(task_id="make-file")).observation["cwd"])
        trees.append((await other.reset(task_id="make-file")).observation["cwd"])
        for cmd in hostile_cmds:
            seen.append((await hostile.step({"command": cmd.replace("{other_tree}", trees[1])})).observation)
            assert processes_of(_slot_uids()) == []
        assert await asyncio.to_thread(os.path.isfile, os.path.join(trees[1], "README.md"))  # still intact
        done = await other.step({"command": "echo 'hello world' > hello.txt"})
        assert done.observation["solved"] and done.reward == 1.0
    return seen, trees


def test_a_hostile_shell_session_and_cleanup(base: str) -> None:
    seen, trees = asyncio.run(_play(base))
    kill, background, rm, environ = seen
    assert "survived" in kill["stdout"] and "Operation not permitted" in kill["stderr"]
    assert background["stdout"] == "started\n"
    assert rm["stdout"].splitlines()[0] == "/etc/hostname" and Path("/etc/hostname").exists()
    assert "Permission denied" in rm["stdout"] + rm["stderr"]  # the other session's tree: not even visible
    assert "Permission denied" in environ["stdout"]
    # the sessions close once the connections are gone
    wait_until(lambda: not any(Path(t).exists() for t in trees), timeout_s=10, interval_s=0.05)
    assert not any(Path(t).exists() for t in trees)
    assert processes_of(_slot_uids()) == []
