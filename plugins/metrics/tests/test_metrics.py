"""``GET /metrics`` over real HTTP on 127.0.0.1 after real WebSocket sessions: scraped and parsed
with ``prometheus_client.parser``."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from openenv.client import GenericEnvClient
from openenv.errors import CapacityError, ValidationError
from openenv.plugins import get_plugin_manager
from openenv.rubric import Rubric
from openenv.testing.live import live_server

ENV = "openenv.testing.envs:EchoEnv"
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class _Says(Rubric):
    def evaluate(self, action: Any, observation: Any) -> float:
        return 1.0 if action.message == "hi" else 0.25


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def test_registered_as_server_only_transport() -> None:
    entry = get_plugin_manager().catalog.transports.get("metrics")
    assert entry.client is None and entry.server == "openenv_metrics.server:MetricsTransport"


def test_a_scrape_before_any_session_shows_zeros() -> None:
    with live_server(ENV, transports=["metrics"]) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.get("/metrics")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        env = srv.app.state.ctx.env_name
        samples = _samples(r.text)
        assert _value(samples, "openenv_steps_total", env=env) == 0
        assert _value(samples, "openenv_sessions_open", env=env) == 0


@pytest.mark.requires_plugins("transport-ws")
async def test_counts_latency_errors_and_refusals_after_real_steps() -> None:
    with live_server(ENV, transports=["ws", "metrics"], token=TOKEN, max_sessions=1,
                     rubric=_Says(name="says_hi")) as srv:
        env = srv.app.state.ctx.env_name
        async with GenericEnvClient(srv.url, token=TOKEN) as client:
            await client.reset()
            for message in ("hi", "hello", "x"):
                await client.step({"message": message})
            with pytest.raises(ValidationError):
                await client.step({"nope": 1})
            with pytest.raises(CapacityError):
                async with GenericEnvClient(srv.url, token=TOKEN) as second:
                    await second.reset()
            async with httpx.AsyncClient(base_url=srv.url) as anon:
                assert (await anon.get("/metrics")).status_code == 401  # the kernel's guard
            async with httpx.AsyncClient(base_url=srv.url, headers=AUTH) as c:
                during = _samples((await c.get("/metrics")).text)
        assert _value(during, "openenv_sessions_open", env=env) == 1
        assert _value(during, "openenv_resets_total", env=env) == 1
        assert _value(during, "openenv_step_seconds_count", env=env) == 3
        assert _value(during, "openenv_steps_total", env=env) == 3  # the refused action never reached a step
        assert _value(during, "openenv_rubric_seconds_count", env=env) == 3
        # The refused client tried once per request it made; each try is a refusal at the server.
        assert _value(during, "openenv_sessions_refused_total", env=env) >= 1
        assert _value(during, "openenv_errors_total", env=env, operation="validate", code="VALIDATION_ERROR") == 1
        assert _value(during, "openenv_step_seconds_sum", env=env) > 0
        with httpx.Client(base_url=srv.url, headers=AUTH) as c:
            for _ in range(100):  # the close arrives after the client's socket closes
                after = _samples(c.get("/metrics").text)
                if _value(after, "openenv_sessions_open", env=env) == 0:
                    break
                time.sleep(0.05)  # noqa: ASYNC251 - the server runs on its own thread
        assert _value(after, "openenv_sessions_open", env=env) == 0
        assert _value(after, "openenv_sessions_closed_total", env=env, reason="client") == 1
