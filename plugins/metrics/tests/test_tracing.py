"""OpenTelemetry spans of a served env (``openenv_metrics.tracing``), with the real SDK's in-memory
exporter: a session span and one child span per reset and step, failures marked."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from openenv.client import GenericEnvClient
from openenv.errors import ExecutionError
from openenv.testing.live import live_server

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="install opentelemetry-sdk to test the spans")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

ENV = "openenv.testing.envs:EchoEnv"
#: Both tests serve the env; the first plays it over /ws (nox -s integration has every plugin and the SDK).
pytestmark = pytest.mark.requires_plugins("transport-ws")
_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, sdk.TracerProvider):  # the process-wide provider can be set once only
        provider = sdk.TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


async def test_a_session_is_a_span_with_its_resets_and_steps(spans: InMemorySpanExporter) -> None:
    with live_server(ENV, transports=["ws", "metrics"]) as srv:
        async with GenericEnvClient(srv.url) as client:
            await client.reset()
            await client.step({"message": "hi"})
            with pytest.raises(ExecutionError):
                await client.step({"message": "boom"})
        async with httpx.AsyncClient(base_url=srv.url) as http:
            caps = (await http.get("/capabilities")).json()
    assert caps["metrics"]["otel_spans"] is True
    finished: list[Any] = list(spans.get_finished_spans())
    (session,) = [s for s in finished if s.name == "openenv.session"]
    children = [s for s in finished if s.parent is not None and s.parent.span_id == session.context.span_id]
    assert [s.name for s in sorted(children, key=lambda s: s.start_time)] == [
        "openenv.reset", "openenv.step", "openenv.step"]
    failed = [s for s in children if s.status.status_code == trace.StatusCode.ERROR]
    assert len(failed) == 1 and failed[0].attributes["openenv.error_code"] == "EXECUTION_ERROR"
    assert session.attributes["openenv.steps"] == 1  # the failed step does not count
    assert session.attributes["openenv.transport"] == "ws"
    assert all(c.start_time >= session.start_time and c.end_time <= session.end_time for c in children)


def test_spans_can_be_turned_off(spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_OTEL", "0")
    with live_server(ENV, transports=["metrics"]) as srv:
        assert httpx.get(srv.url + "/capabilities").json()["metrics"]["otel_spans"] is False
    assert spans.get_finished_spans() == ()


@pytest.mark.requires_plugins("provider-local", "env-echo")
async def test_a_pool_launch_is_a_span(spans: InMemorySpanExporter, tmp_path: Any,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv.pool import EnvPool

    monkeypatch.setenv("OPENENV_STATE_DIR", str(tmp_path / "state"))
    async with EnvPool(env="echo", provider="local", replicas=1):
        pass
    (launch,) = [s for s in spans.get_finished_spans() if s.name == "openenv.launch"]
    assert launch.attributes["openenv.provider"] == "local" and launch.attributes["openenv.env"] == "echo"
    assert launch.end_time > launch.start_time
