"""WebSocket messages count against the server-wide body budget (issue 21, item 1).

Large frames are held against ``ServerConfig.max_body_budget_bytes`` while they are parsed and
answered, on ``/ws`` and WebSocket ``/mcp``: past the budget a frame is answered with a
``CAPACITY_REACHED`` error and the session is kept, instead of the server holding more memory.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from websockets.sync.client import connect

from openenv.env import Environment
from openenv.limits import BUDGETED_MESSAGE_BYTES
from openenv.testing import live_server as served
from openenv.testing import wait_until
from openenv.types import Action, Observation, State

MIB = 1024 * 1024
GATE = threading.Event()


class TextAction(Action):
    text: str = ""


class GatedEnv(Environment[TextAction, Observation, State]):
    """Concurrent sessions; a step whose text starts with ``wait`` blocks until ``GATE`` is set."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
        return Observation()

    def step(self, action: TextAction, **kw: Any) -> Observation:
        if action.text.startswith("wait"):
            GATE.wait(30)
        return Observation(metadata={"length": len(action.text)})

    @property
    def state(self) -> State:
        return State()


def step_frame(text: str) -> str:
    return json.dumps({"type": "step", "data": {"text": text}})


def test_a_large_frame_past_the_budget_is_refused_and_the_session_kept() -> None:
    GATE.clear()
    with served(GatedEnv, transports=["ws"], max_message_bytes=2 * MIB, max_body_budget_bytes=MIB) as srv:
        budget = srv.ctx.body_budget
        with connect(srv.ws_url, open_timeout=10, proxy=None, max_size=4 * MIB) as a, \
                connect(srv.ws_url, open_timeout=10, proxy=None, max_size=4 * MIB) as b:
            for ws in (a, b):
                ws.send('{"type":"reset","data":{}}')
                assert '"observation"' in ws.recv(timeout=10)
            big = "wait" + "x" * (700 * 1024)
            a.send(step_frame(big))  # held (700 KiB of the 1 MiB budget) while its step blocks
            wait_until(lambda: budget.used >= 700 * 1024, timeout_s=10, interval_s=0.01)
            b.send(step_frame("y" * (700 * 1024)))  # would pass the budget
            refused = json.loads(b.recv(timeout=10))
            assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"
            assert "max_body_budget_bytes" in refused["data"]["message"]
            b.send(step_frame("small"))  # the session is kept, and small frames are never counted
            assert json.loads(b.recv(timeout=10))["data"]["metadata"]["length"] == 5
            GATE.set()
            assert json.loads(a.recv(timeout=10))["data"]["metadata"]["length"] == len(big)
            wait_until(lambda: budget.used == 0, timeout_s=5, interval_s=0.01)
            assert budget.used == 0
            b.send(step_frame("y" * (700 * 1024)))  # now it fits
            assert json.loads(b.recv(timeout=10))["data"]["metadata"]["length"] == 700 * 1024
        assert budget.used == 0


def test_a_frame_under_the_threshold_never_touches_the_budget() -> None:
    with served(GatedEnv, transports=["ws"], max_body_budget_bytes=MIB) as srv:
        srv.ctx.body_budget.take(MIB)  # the budget is spent
        with connect(srv.ws_url, open_timeout=10, proxy=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            assert '"observation"' in ws.recv(timeout=10)
            ws.send(step_frame("z" * (BUDGETED_MESSAGE_BYTES - 100)))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"


def test_websocket_mcp_frames_share_the_budget() -> None:
    with served(GatedEnv, transports=["mcp"], max_message_bytes=2 * MIB, max_body_budget_bytes=MIB) as srv:
        budget = srv.ctx.body_budget
        url = srv.url.replace("http://", "ws://") + "/mcp"
        request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list",
                              "params": {"pad": "p" * (512 * 1024)}})
        with connect(url, open_timeout=10, proxy=None, max_size=4 * MIB) as ws:
            budget.take(700 * 1024)  # another connection's large message is being handled
            ws.send(request)
            refused = json.loads(ws.recv(timeout=10))
            assert refused["error"]["data"] == {"code": "CAPACITY_REACHED"}
            assert "max_body_budget_bytes" in refused["error"]["message"]
            budget.give(700 * 1024)
            ws.send(request)  # the same frame once there is room: answered (the connection was kept)
            answered = json.loads(ws.recv(timeout=10))
            assert answered["id"] == 7 and answered.get("error", {}).get("data") != {"code": "CAPACITY_REACHED"}
        assert budget.used == 0
