"""OpenTelemetry spans of a served env, when the OpenTelemetry API is installed.

``SessionSpans`` is a direct observer of the session manager (as ``ServerMetrics`` is): a session
is a span ``openenv.session`` from its opening to its close, and each reset and step a child span
``openenv.reset`` / ``openenv.step`` with its real start and end times. Attributes:
``openenv.env``, ``openenv.session_id``, ``openenv.transport``, ``openenv.close_reason``,
``openenv.steps``, ``openenv.rubric_seconds``; a failed reset or step has status ERROR and the wire
error code in ``openenv.error_code``.

Spans go to whatever tracer provider the process configured (``opentelemetry-sdk`` and an
exporter); with only the API installed they are no-ops. ``OPENENV_OTEL=0`` turns them off.
"""

from __future__ import annotations

import time
from typing import Any

from openenv.events import LifecycleEvent, OperationTimed, SessionClosed, SessionOpened, otel_trace

__all__ = ["SessionSpans", "tracing_available"]

#: Sessions whose span is still open, at most this many (a leak of close events cannot grow it
#: without bound: the oldest span is ended when the limit is reached).
MAX_OPEN_SPANS = 65536


def tracing_available() -> bool:
    """Whether spans are made (``openenv.events.otel_trace``: the API installed, ``OPENENV_OTEL`` not ``0``)."""
    return otel_trace() is not None


class SessionSpans:
    """Spans of one server's sessions (see the module docstring)."""

    def __init__(self) -> None:
        trace = otel_trace()
        assert trace is not None, "SessionSpans needs the OpenTelemetry API (check tracing_available() first)"
        self._trace = trace
        self._tracer = trace.get_tracer("openenv")
        self._sessions: dict[str, Any] = {}

    def __call__(self, event: LifecycleEvent) -> None:
        if isinstance(event, OperationTimed):
            if event.operation in ("step", "reset"):
                self._operation(event)
        elif isinstance(event, SessionOpened):
            if len(self._sessions) >= MAX_OPEN_SPANS:
                self._sessions.pop(next(iter(self._sessions))).end()
            span = self._tracer.start_span("openenv.session", attributes={
                "openenv.env": event.env, "openenv.session_id": event.session_id,
                "openenv.transport": event.transport or ""})
            self._sessions[event.session_id] = span
        elif isinstance(event, SessionClosed):
            span = self._sessions.pop(event.session_id, None)
            if span is not None:
                span.set_attribute("openenv.close_reason", event.reason)
                span.set_attribute("openenv.steps", event.steps)
                span.end()

    def _operation(self, event: OperationTimed) -> None:
        end = time.time_ns()
        parent = self._sessions.get(event.session_id)
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        attributes: dict[str, Any] = {"openenv.env": event.env, "openenv.session_id": event.session_id}
        if event.rubric_seconds is not None:
            attributes["openenv.rubric_seconds"] = event.rubric_seconds
        span = self._tracer.start_span(f"openenv.{event.operation}", context=context, attributes=attributes,
                                       start_time=end - int(event.seconds * 1e9))
        if event.error_code is not None:
            span.set_attribute("openenv.error_code", event.error_code)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error_code))
        span.end(end_time=end)

    def close(self) -> None:
        """End the spans of sessions still open (the server is stopping)."""
        while self._sessions:
            self._sessions.pop(next(iter(self._sessions))).end()
