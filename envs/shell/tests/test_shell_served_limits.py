"""Bad input through a served shell session: 8 GiB allocations, a 10 GiB file, 1 GB of output and
many concurrent executions each end with a structured result, the session keeps working, and
another session is untouched."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openenv.client import GenericEnvClient
from openenv.plugins import PluginManager
from openenv.testing import live_server, wait_until
from openenv_sandbox import default_sandbox
from openenv_sandbox.host import processes_of

pytestmark = [pytest.mark.requires_plugins("transport-ws"),
              pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")]
MIB = 1024 * 1024


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
    with live_server("openenv_env_shell.env:ShellEnv", transports=["ws"], plugin_manager=pm,
                     max_sessions=70) as srv:
        yield srv.url


async def _bad_input(base: str) -> dict[str, dict[str, Any]]:
    cmds = {
        "8 GiB": "python3 -c 'bytearray(8 << 30)'",
        "10 GiB file": "exec head -c 10G /dev/zero > big",
        "file left": "stat -c %s big",
        "1 GB out": "exec head -c 1000000000 /dev/zero",
        "alive": "echo alive",
    }
    seen: dict[str, dict[str, Any]] = {}
    async with GenericEnvClient(base) as hostile, GenericEnvClient(base) as other:
        await hostile.reset(task_id="make-file")
        await other.reset(task_id="make-file")
        for name, cmd in cmds.items():
            started = time.monotonic()
            result = await hostile.step({"command": cmd})
            seen[name] = {**result.observation, "took": time.monotonic() - started, "episode_done": result.done,
                          "reward": result.reward}
            assert processes_of(_slot_uids()) == []
        done = await other.step({"command": "echo 'hello world' > hello.txt"})
        assert done.observation["solved"] and done.reward == 1.0
    return seen


def test_memory_file_size_and_output_limits_through_a_served_session(base: str) -> None:
    seen = asyncio.run(_bad_input(base))
    memory, big, left, out, alive = (seen[k] for k in ("8 GiB", "10 GiB file", "file left", "1 GB out", "alive"))
    limits = alive["limits"]
    assert memory["exit_code"] == 1 and "MemoryError" in memory["stderr"] and not memory["timed_out"]
    assert big["killed_by"] == "file_size" and not big["timed_out"]
    assert int(left["stdout"]) == limits["file_size_bytes"] == 16 * MIB
    assert f"truncated at {limits['output_bytes']} bytes" in out["stdout"]
    assert len(out["stdout"]) < limits["output_bytes"] + 200 and not out["timed_out"]
    assert alive["stdout"] == "alive\n" and alive["exit_code"] == 0
    for obs in seen.values():
        assert obs["took"] < limits["wall_time_s"] + 5 and obs["duration_s"] < limits["wall_time_s"] + 1
        assert not obs["episode_done"] and obs["reward"] == 0.0


async def _concurrent(base: str, sessions: int) -> list[dict[str, Any]]:
    clients = [GenericEnvClient(base) for _ in range(sessions)]
    try:
        await asyncio.gather(*(c.__aenter__() for c in clients))
        await asyncio.gather(*(c.reset(task_id="make-file") for c in clients))
        results = await asyncio.gather(*(
            c.step({"command": f"echo {i} > mine.txt && sleep 0.5 && cat mine.txt && id -u"})
            for i, c in enumerate(clients)))
        # the server still serves a session opened after them
        async with GenericEnvClient(base) as late:
            await late.reset(task_id="make-file")
            assert (await late.step({"command": "echo 'hello world' > hello.txt"})).observation["solved"]
        return [r.observation for r in results]
    finally:
        await asyncio.gather(*(c.__aexit__(None, None, None) for c in clients), return_exceptions=True)


def test_64_concurrent_executions_through_served_sessions(base: str) -> None:
    sessions = 64  # as many as default_sandbox() has slots: each runs as its own uid (about 3 s here)
    seen = asyncio.run(_concurrent(base, sessions))
    for i, obs in enumerate(seen):
        mine, uid = obs["stdout"].split()
        assert obs["exit_code"] == 0 and mine == str(i) and int(uid) in _slot_uids(), obs
    assert len({obs["cwd"] for obs in seen}) == sessions
    assert len({obs["stdout"].split()[1] for obs in seen}) > 1  # they ran side by side, in different slots
    wait_until(lambda: not processes_of(_slot_uids()), timeout_s=10, interval_s=0.05)
    assert processes_of(_slot_uids()) == []
