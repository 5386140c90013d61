"""The pool's own metrics (``EnvPool.metrics``/``serve_metrics``), read back with prometheus-client's
parser, over real local servers: placements per replica, replicas by state, a replica killed
mid-run (lost, replaced, the time to ``SessionLostError``), refusals when every replica is down, the
served ``/metrics`` with its token, and the error without prometheus-client."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from openenv.errors import ConfigError, SessionLostError
from openenv.pool import EnvPool, PoolUnavailableError
from openenv.testing import free_port, wait_until

pytestmark = [pytest.mark.requires_plugins("provider-local", "transport-ws", "env-echo")]
prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OPENENV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    yield


def _pgid(pool: EnvPool[Any, Any], url: str) -> int:
    (replica,) = [r for r in pool.replicas() if r.url == url]
    return int(replica.handle.pgid)  # type: ignore[union-attr]


async def test_metrics_follow_placements_and_a_killed_replica() -> None:
    async with EnvPool(env="echo", provider="local", replicas=2, sessions_per_replica=1,
                       health_interval_s=0.2) as pool:
        async with pool.session() as a, pool.session() as b:
            await a.reset()
            await b.reset()
            text = pool.metrics()
            assert isinstance(text, str)
            m = _samples(text)
            # Both replicas hold their one session: full, one placement each.
            assert _value(m, "openenv_pool_replicas", state="full") == 2
            assert _value(m, "openenv_pool_replicas", state="ready") == 0
            assert _value(m, "openenv_pool_replicas", state="down") == 0
            for url in (a.base_url, b.base_url):
                assert _value(m, "openenv_pool_sessions", replica=url) == 1
                assert _value(m, "openenv_pool_placements_total", replica=url) == 1
            assert _value(m, "openenv_pool_launches_total") == 2
            assert _value(m, "openenv_pool_replicas_lost_total") == 0
            assert _value(m, "openenv_pool_session_lost_seconds_count") == 0

            dead = a.base_url
            os.killpg(_pgid(pool, dead), signal.SIGKILL)
            with pytest.raises(SessionLostError):
                for _ in range(200):  # a step that landed before the kill: try again (bounded)
                    await a.step({"message": "again"})
                    await asyncio.sleep(0.05)
            # The client may see its connection drop before the pool's next health check finds
            # the replica down (then its sessions are marked lost, and counted).
            for _ in range(300):  # bounded; asleep, so the pool's monitor runs
                if pool.stats.replicas_lost:
                    break
                await asyncio.sleep(0.1)
            m = _samples(str(pool.metrics()))
            assert _value(m, "openenv_pool_replicas_lost_total") == 1
            assert _value(m, "openenv_pool_session_lost_seconds_count") == 1
            # Found down within a few health checks of its last good one (0.2 s apart).
            assert 0 <= _value(m, "openenv_pool_session_lost_seconds_sum") < 30
            assert _value(m, "openenv_pool_session_lost_seconds_bucket", le="+Inf") == 1
            await b.step({"message": "still here"})
        for _ in range(600):  # bounded: the watcher replaces the dead replica
            if pool.replacements == 1 and len([r for r in pool.replicas() if r.healthy]) == 2:
                break
            await asyncio.sleep(0.1)
        async with pool.session() as c:
            await c.reset()
            m = _samples(str(pool.metrics()))
    assert _value(m, "openenv_pool_replicas_replaced_total") == 1
    assert _value(m, "openenv_pool_launches_total") == 3
    assert _value(m, "openenv_pool_launch_failures_total") == 0
    # The dead replica's placements stay counted; the gauges show only the live replicas.
    assert _value(m, "openenv_pool_placements_total", replica=dead) == 1
    assert ("openenv_pool_sessions", frozenset({("replica", dead)})) not in m
    assert sum(v for (name, _), v in m.items() if name == "openenv_pool_placements_total") == 3
    assert _value(m, "openenv_pool_replicas", state="down") == 0


def _serve(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "openenv", "serve", "echo", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_refusals_and_the_served_endpoint_with_its_token() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = _serve(port)
    try:
        with EnvPool([url], health_interval_s=0.1, health_timeout_s=0.5, token="s3cret").sync() as pool:
            assert wait_until(lambda: all(r.healthy for r in pool.replicas()), timeout_s=60)
            endpoint = pool.serve_metrics()  # the pool's token by default, on 127.0.0.1
            try:
                assert endpoint.host == "127.0.0.1"
                with pool.session() as env:
                    env.reset()
                server.terminate()
                server.wait(timeout=20)
                assert wait_until(lambda: not any(r.healthy for r in pool.replicas()), timeout_s=30)
                with pytest.raises(PoolUnavailableError), pool.session():
                    pass
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(endpoint.url, timeout=10)
                assert refused.value.code == 401 and "Bearer" in refused.value.read().decode()
                request = urllib.request.Request(endpoint.url, headers={"Authorization": "Bearer s3cret"})
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.status == 200
                    m = _samples(answer.read().decode())
                with pytest.raises(urllib.error.HTTPError) as missing:
                    urllib.request.urlopen(endpoint.url.replace("/metrics", "/nope"), timeout=10)
                assert missing.value.code == 404
            finally:
                endpoint.close()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=20)
    assert _value(m, "openenv_pool_placements_refused_total", reason="unavailable") >= 1
    assert _value(m, "openenv_pool_replicas", state="down") == 1
    assert _value(m, "openenv_pool_replicas_lost_total") == 1
    assert _value(m, "openenv_pool_placements_total", replica=url) == 1
    assert _value(m, "openenv_pool_launches_total") == 0  # URL replicas: nothing started


async def test_metrics_register_into_a_registry_of_yours_with_labels() -> None:
    pool: EnvPool[Any, Any] = EnvPool(["http://127.0.0.1:9"], health_timeout_s=0.5)
    registry = prometheus_client.CollectorRegistry()
    assert pool.metrics(registry, labels={"pool": "train"}) is None
    try:
        with pytest.raises(PoolUnavailableError):
            async with pool.session():
                pass
        m = _samples(prometheus_client.generate_latest(registry).decode())
    finally:
        await pool.close()
    assert _value(m, "openenv_pool_replicas", pool="train", state="down") == 1
    assert _value(m, "openenv_pool_placements_refused_total", pool="train", reason="unavailable") == 1
    # It never answered: down, but not a lost replica (nothing was lost with it).
    assert _value(m, "openenv_pool_replicas_lost_total", pool="train") == 0
    assert _value(m, "openenv_pool_session_lost_seconds_count", pool="train") == 0


def test_without_prometheus_client_the_error_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    pool: EnvPool[Any, Any] = EnvPool(["http://127.0.0.1:9"])
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # an import of it fails
    with pytest.raises(ConfigError, match="pip install prometheus-client"):
        pool.metrics()
    with pytest.raises(ConfigError, match="pip install prometheus-client"):
        pool.serve_metrics()


def test_a_taken_port_is_a_clear_error() -> None:
    pool: EnvPool[Any, Any] = EnvPool(["http://127.0.0.1:9"])
    first = pool.serve_metrics()
    try:
        with pytest.raises(ConfigError, match="another --metrics-port"):
            pool.serve_metrics(first.port)
    finally:
        first.close()
