"""Abrupt disconnects mid-step: nothing leaks and every env is closed on its own thread."""

from __future__ import annotations

import asyncio
import threading

import pytest
from ws_support import AffinityEnv, eventually, live_server, send, ws_open

BATCH = 20
ROUNDS = 10  # 200 connections in all


def _session_threads(ignore: frozenset[int] = frozenset()) -> list[threading.Thread]:
    """Session threads alive now, leaving out ``ignore`` (threads other tests of the same
    process left behind before this one started: only this test's own threads count)."""
    return [t for t in threading.enumerate()
            if t.name.startswith("openenv-session-") and t.ident not in ignore]


@pytest.mark.slow
async def test_200_abrupt_disconnects_mid_step_leak_nothing() -> None:
    AffinityEnv.clear()
    baseline = threading.active_count()
    earlier = frozenset(t.ident for t in _session_threads() if t.ident is not None)
    with live_server(AffinityEnv, max_sessions=BATCH) as server:
        sessions = server.ctx.sessions
        for round_no in range(ROUNDS):
            AffinityEnv.GATE.clear()
            sockets = await asyncio.gather(*(ws_open(server) for _ in range(BATCH)))
            for ws in sockets:
                await send(ws, {"type": "step", "data": {"message": "slow"}})
            target = (round_no + 1) * BATCH
            await eventually(lambda target=target: AffinityEnv.started >= target)  # all mid-step
            for ws in sockets:
                ws.transport.abort()  # drop the TCP connection: no close frame, no close handshake
            await asyncio.sleep(0.02)
            AffinityEnv.GATE.set()  # let the steps finish; their replies go nowhere
            await eventually(lambda: sessions.active == 0, timeout_s=30)
        assert AffinityEnv.started == ROUNDS * BATCH
        assert len(AffinityEnv.created) == ROUNDS * BATCH
        closes = list(AffinityEnv.closes)
        assert len(closes) == ROUNDS * BATCH
        assert all(creator == closer for creator, closer, _ in closes)
        assert all(name.startswith("openenv-session-") for _, _, name in closes)
        await eventually(lambda: not _session_threads(earlier), timeout_s=30,
                         what="every session thread this test started has ended")
        assert server.ctx.transports[0]._cleanups == set()
    # The server thread and its pools are gone too; allow a few threads of slack (e.g. the
    # asyncio default executor of this test's loop).
    await eventually(lambda: threading.active_count() <= baseline + 3, timeout_s=30)
