"""A WebSocket connection that never sends a frame gives its session slot back (issue 21, item 4)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openenv.env import Environment
from openenv.testing import live_server as served
from openenv.testing import wait_until
from openenv.types import Action, Observation, State


class QuietEnv(Environment[Action, Observation, State]):
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
        return Observation()

    def step(self, action: Action, **kw: Any) -> Observation:
        return Observation()

    @property
    def state(self) -> State:
        return State()


def test_a_silent_websocket_is_closed_and_its_slot_freed() -> None:
    with served(QuietEnv, transports=["ws"], transport_options={"ws": {"first_frame_timeout_s": 0.5}}) as srv:
        with connect(srv.ws_url, open_timeout=10, proxy=None) as ws:
            # The transport accepts the upgrade *before* it opens the session (as upstream does, so
            # that a refusal reaches the client as a frame): the handshake returning does not mean
            # the slot is taken yet. Wait for it, well within the 0.5 s first-frame timeout.
            deadline = time.monotonic() + 0.4
            while srv.ctx.sessions.active != 1 and time.monotonic() < deadline:
                time.sleep(0.005)
            assert srv.ctx.sessions.active == 1
            with pytest.raises(ConnectionClosed) as info:
                ws.recv(timeout=10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008
        assert "no frame within 0.5 s" in info.value.rcvd.reason
        wait_until(lambda: not srv.ctx.sessions.active, timeout_s=5, interval_s=0.02)
        assert srv.ctx.sessions.active == 0
        with connect(srv.ws_url, open_timeout=10, proxy=None) as ws:  # a talking client stays
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=10)
            time.sleep(0.8)
            ws.send('{"type":"reset","data":{}}')
            assert '"observation"' in ws.recv(timeout=10)


def test_a_silent_mcp_websocket_is_closed_and_its_slot_freed() -> None:
    # WebSocket /mcp opens its session on connect, as /ws does: a connection that never speaks
    # must not hold the slot forever.
    with served(QuietEnv, transports=["mcp"], max_sessions=1,
                transport_options={"mcp": {"first_frame_timeout_s": 0.5}}) as srv:
        url = srv.url.replace("http://", "ws://") + "/mcp"
        with connect(url, open_timeout=10, proxy=None) as ws:
            wait_until(lambda: srv.ctx.sessions.active == 1, timeout_s=5, interval_s=0.005)
            with pytest.raises(ConnectionClosed) as info:
                ws.recv(timeout=10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1008
        assert "no frame within 0.5 s" in info.value.rcvd.reason
        wait_until(lambda: not srv.ctx.sessions.active, timeout_s=5, interval_s=0.02)
        assert srv.ctx.sessions.active == 0
        with connect(url, open_timeout=10, proxy=None) as ws:  # the freed slot serves a talking client
            ws.send('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
            first = ws.recv(timeout=10)
            time.sleep(0.8)
            ws.send('{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}')
            assert '"id":2' in ws.recv(timeout=10).replace(" ", "") and first
