"""Lifecycle observers get typed events from a real server, on its event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv import hookimpl
from openenv.client import GenericEnvClient
from openenv.events import ServerStarted, ServerStopped, SessionClosed, SessionOpened
from openenv.plugins import PluginManager
from openenv.testing import live_server, make_plugin_module


@pytest.mark.requires_plugins("transport-ws")
def test_a_real_server_reports_typed_events_on_its_event_loop() -> None:
    seen: list[tuple[Any, bool]] = []

    def record(event: Any) -> None:
        try:
            asyncio.get_running_loop()
            on_loop = True
        except RuntimeError:
            on_loop = False
        seen.append((event, on_loop))

    hooks = []
    for name in ("openenv_server_started", "openenv_server_stopped", "openenv_session_opened",
                 "openenv_session_closed"):
        def observer(event: Any) -> None:
            record(event)

        observer.__name__ = name
        hooks.append(hookimpl(observer))

    pm = PluginManager(strict=True)  # the installed plugins: echo env, ws transport
    pm.register(make_plugin_module(*hooks), name="observer")
    # The kit's live server: stop() raises unless the server shut down (so ServerStopped ran).
    with live_server("echo", plugin_manager=pm, transports=["ws"]) as server, \
            GenericEnvClient(server.url, transport="ws").sync() as client:
        client.reset()
        client.step({"message": "hi"})

    events = [event for event, _ in seen]
    assert [type(e) for e in events] == [ServerStarted, SessionOpened, SessionClosed, ServerStopped]
    assert all(on_loop for _, on_loop in seen)
    started, opened, closed, stopped = events
    assert isinstance(started, ServerStarted)
    assert (started.env, started.host, started.transports) == ("echo", "127.0.0.1", ("ws",))
    assert isinstance(opened, SessionOpened) and isinstance(closed, SessionClosed)
    assert opened.session_id == closed.session_id and opened.env == "echo"
    assert opened.transport == "ws" and opened.active_sessions == 1
    assert closed.active_sessions == 0 and closed.steps == 1 and closed.reason
    assert isinstance(stopped, ServerStopped) and stopped.env == "echo"
