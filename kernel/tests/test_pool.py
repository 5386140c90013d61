"""``EnvPool`` over real local servers: placement, a replica killed mid-run, replacement, scaling,
every replica down, a URL replica that comes back, and no process left behind."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from openenv.errors import ConfigError, SessionLostError
from openenv.pool import EnvPool, PoolUnavailableError
from openenv.testing import wait_until

pytestmark = [pytest.mark.requires_plugins("provider-local", "transport-ws", "env-echo")]


def _descendants() -> set[int]:
    from openenv_provider_local.process import descendants

    return set(descendants())


@pytest.fixture(autouse=True)
def no_leftover_processes(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Processes counted before and after: the pool stops everything it started."""
    monkeypatch.setenv("OPENENV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    before = _descendants()
    yield
    left = wait_until(lambda: not (_descendants() - before), timeout_s=10.0) or (_descendants() - before)
    if left is not True:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert left is True, f"the pool left processes running: {left}"


def _pid(pool: EnvPool[Any, Any], url: str) -> int:
    for replica in pool._replicas:
        if replica.url == url and replica.handle is not None:
            return int(replica.handle.pgid)  # type: ignore[attr-defined]
    raise AssertionError(url)


async def test_sessions_spread_and_survive_a_killed_replica() -> None:
    async with EnvPool(env="echo", provider="local", replicas=2, sessions_per_replica=4,
                       health_interval_s=0.2) as pool:
        async with pool.session() as a, pool.session() as b:
            assert {a.base_url, b.base_url} == {r.url for r in pool.replicas()}  # least-loaded placement
            await a.reset()
            await b.reset()
            assert (await a.step({"message": "hi"})).observation["echoed_message"] == "hi"
            dead = a.base_url
            os.killpg(_pid(pool, dead), signal.SIGKILL)
            with pytest.raises(SessionLostError):
                await a.step({"message": "again"})
            # The other replica's session is untouched; new sessions go elsewhere.
            assert (await b.step({"message": "ok"})).observation["echoed_message"] == "ok"
            async with pool.session() as c:
                assert c.base_url != dead
                await c.reset()
        # The dead replica is replaced through the provider.
        for _ in range(600):
            healthy = [r for r in pool.replicas() if r.healthy]
            if len(healthy) == 2 and dead not in {r.url for r in healthy}:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail(f"the dead replica was not replaced: {pool.replicas()}")
        assert pool.replacements == 1
        async with pool.session() as d:
            await d.reset()


async def test_scale_up_on_demand_and_down_when_idle() -> None:
    async with EnvPool(env="echo", provider="local", min_replicas=1, max_replicas=2, sessions_per_replica=1,
                       idle_timeout_s=0.3, health_interval_s=0.1) as pool:
        assert len(pool.replicas()) == 1
        async with pool.session() as a, pool.session() as b:
            assert len(pool.replicas()) == 2 and a.base_url != b.base_url
            await a.reset()
            await b.reset()
        for _ in range(300):
            if len(pool.replicas()) == 1:
                break
            await asyncio.sleep(0.1)
        assert len(pool.replicas()) == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "openenv", "serve", "echo", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_every_replica_down_fails_fast_and_a_returning_server_is_reused() -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with EnvPool([url, "http://127.0.0.1:9"], health_interval_s=0.1, health_timeout_s=0.5).sync() as pool:
        with pytest.raises(PoolUnavailableError) as info, pool.session():
            pass
        rows = info.value.data["replicas"]
        assert {row["url"] for row in rows} == {url, "http://127.0.0.1:9"}
        assert all(row["error"] for row in rows) and url in str(info.value)
        # A server starts at that address: the pool uses it again.
        server = _serve(port)
        try:
            assert wait_until(lambda: any(r.healthy for r in pool.replicas()), timeout_s=60)
            with pool.session() as env:
                assert env.base_url == url
                env.reset()
                assert env.step({"message": "back"}).observation["echoed_message"] == "back"
        finally:
            server.terminate()
            server.wait(timeout=20)


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(ConfigError, match="either urls"):
        EnvPool(["http://127.0.0.1:1"], env="echo")
    with pytest.raises(ConfigError, match="min_replicas <= replicas"):
        EnvPool(env="echo", replicas=3, max_replicas=2)
    with pytest.raises(ConfigError, match="needs urls"):
        EnvPool()


async def test_an_episode_survives_its_server_through_a_snapshot_and_forks_across_replicas() -> None:
    """Snapshot, kill the server, restore on another replica: the episode goes on exactly as a
    replay of its actions does; a fork lands on the least-loaded replica and goes on independently."""
    walk = "openenv.testing.walk:WalkEnv"
    actions = [{"delta": d} for d in (1, -2, 3)]
    rest = [{"delta": d} for d in (0, 2, -1)]
    async with EnvPool(env=walk, provider="local", replicas=2, sessions_per_replica=4,
                       health_interval_s=0.2) as pool:
        async with pool.session() as env:
            await env.reset(seed=11)
            for action in actions:
                await env.step(action)
            snap = await env.snapshot()
            branch, at = await pool.fork(env)
            try:
                assert branch.base_url != env.base_url  # the least-loaded replica: the other server
                assert at.observation["position"] == snap["state"]["position"]
                forked = [(await branch.step(a)).observation["position"] for a in rest]
            finally:
                await pool.release(branch)
            dead = env.base_url
            os.killpg(_pid(pool, dead), signal.SIGKILL)
            with pytest.raises(SessionLostError):
                await env.step(rest[0])
        revived, _ = await pool.restore(snap)
        try:
            assert revived.base_url != dead
            assert (await revived.state()).get("step_count") == 3
            assert [(await revived.step(a)).observation["position"] for a in rest] == forked
        finally:
            await pool.release(revived)
        async with pool.session() as replay:
            await replay.reset(seed=11)
            for action in actions:
                await replay.step(action)
            assert [(await replay.step(a)).observation["position"] for a in rest] == forked


async def test_the_kits_replica_loss_check_on_local_processes() -> None:
    """``openenv.testing.check_replica_loss`` (what the Kubernetes, Ray and Swarm pool tests run)."""
    from openenv.testing import check_replica_loss

    def kill(handle: Any) -> None:
        os.killpg(int(handle.pgid), signal.SIGKILL)

    async with EnvPool(env="echo", provider="local", replicas=2, health_interval_s=0.2) as pool:
        result = await check_replica_loss(pool, kill, timeout_s=60)
    assert result["episodes_ok"] == 6 and result["replacements"] == 1
    assert result["lost_after_s"] < 5
