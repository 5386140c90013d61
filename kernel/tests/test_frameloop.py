"""The kernel's WebSocket frame loop (``openenv.frameloop``) against a scripted ASGI connection."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

from openenv.context import ServerContext
from openenv.frameloop import WATCH_AFTER_S, Close, FrameLoop
from openenv.limits import BUDGETED_MESSAGE_BYTES, BodyBudget


class Peer:
    """A client as the ASGI server shows it: queued events in, sent messages recorded."""

    def __init__(self, *events: dict[str, Any]) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        for event in events:
            self.inbox.put_nowait(event)
        self.sent: list[dict[str, Any]] = []

    def text(self, text: str) -> None:
        self.inbox.put_nowait({"type": "websocket.receive", "text": text})

    def vanish(self) -> None:
        self.inbox.put_nowait({"type": "websocket.disconnect", "code": 1006})

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.get()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def replies(self) -> list[str]:
        return [m["text"] for m in self.sent if m["type"] == "websocket.send"]


def _loop(max_bytes: int = 1 << 20, budget: int = 1 << 30, first: float | None = None) -> FrameLoop:
    ctx = SimpleNamespace(config=SimpleNamespace(max_message_bytes=max_bytes), body_budget=BodyBudget(budget))
    return FrameLoop(cast(ServerContext, ctx), first_frame_timeout_s=first, label="/t",
                     binary_reply="binary?", busy_reply=lambda detail: "busy: " + detail)


SCOPE: dict[str, Any] = {"type": "websocket", "headers": []}


async def _echo(text: str) -> str | Close | None:
    if text == "bye":
        return Close("ciao", 1000, "")
    if text == "note":
        return None  # no reply
    return "re:" + text


async def test_one_reply_per_frame_in_order_and_close_after_its_reply() -> None:
    peer = Peer()
    for text in ("a", "note", "b", "bye", "never"):
        peer.text(text)
    ending = await _loop().run(SCOPE, peer.receive, peer.send, _echo)
    assert peer.replies == ["re:a", "re:b", "ciao"] and ending == (1000, "")


async def test_binary_frames_get_the_transports_reply_and_activity_is_counted() -> None:
    peer = Peer({"type": "websocket.receive", "bytes": b"\x00"})
    peer.vanish()
    seen: list[int] = []
    ending = await _loop().run(SCOPE, peer.receive, peer.send, _echo, activity=lambda: seen.append(1))
    assert peer.replies == ["binary?"] and ending is None and seen == [1]


async def test_a_message_over_the_limit_closes_with_1009_naming_it() -> None:
    peer = Peer()
    peer.text("é" * 40)  # 80 UTF-8 bytes in 40 characters: counted in bytes
    ending = await _loop(max_bytes=64).run(SCOPE, peer.receive, peer.send, _echo)
    assert ending is not None and ending[0] == 1009 and "max_message_bytes=64" in ending[1]
    assert peer.replies == []


async def test_no_first_frame_closes_with_1008() -> None:
    peer = Peer()
    ending = await _loop(first=0.05).run(SCOPE, peer.receive, peer.send, _echo)
    assert ending == (1008, "no frame within 0.05 s of connecting")


async def test_a_large_frame_is_held_against_the_budget_until_its_reply_and_refused_past_it() -> None:
    loop = _loop(budget=BUDGETED_MESSAGE_BYTES + 10)
    used: list[int] = []

    async def watch_budget(text: str) -> str:
        used.append(loop.budget.used)
        return "ok"

    big = "x" * BUDGETED_MESSAGE_BYTES
    peer = Peer()
    peer.text(big)
    peer.text(big + "x" * 20)  # past the budget: refused, the connection kept
    peer.text("small")
    peer.vanish()
    await loop.run(SCOPE, peer.receive, peer.send, watch_budget)
    assert used == [BUDGETED_MESSAGE_BYTES, 0]
    assert peer.replies[0] == "ok" and peer.replies[1].startswith("busy: ") and peer.replies[2] == "ok"
    assert loop.budget.used == 0


async def test_a_client_that_vanishes_while_its_dispatch_hangs_is_noticed() -> None:
    loop = _loop()
    cancelled = asyncio.Event()

    async def hang(text: str) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    peer = Peer()
    peer.text("step")
    run = asyncio.ensure_future(loop.run(SCOPE, peer.receive, peer.send, hang))
    await asyncio.sleep(WATCH_AFTER_S / 2)
    peer.vanish()
    ending = await asyncio.wait_for(run, 10 * WATCH_AFTER_S + 5)
    assert ending is None and cancelled.is_set() and peer.replies == []
    assert not loop._watches and loop._ticker is None  # nothing left running


async def test_a_frame_sent_behind_a_slow_dispatch_is_answered_in_order() -> None:
    async def slow(text: str) -> str:
        if text == "slow":
            await asyncio.sleep(3 * WATCH_AFTER_S)  # long enough to be read ahead of
        return "re:" + text

    peer = Peer()
    peer.text("slow")
    peer.text("next")
    peer.vanish()
    ending = await _loop().run(SCOPE, peer.receive, peer.send, slow)
    assert peer.replies == ["re:slow", "re:next"] and ending is None


async def test_shutdown_cancelling_the_handler_is_not_mistaken_for_a_vanished_client() -> None:
    async def hang(text: str) -> str:
        await asyncio.sleep(60)
        return "late"

    peer = Peer()
    peer.text("step")
    run = asyncio.ensure_future(_loop().run(SCOPE, peer.receive, peer.send, hang))
    await asyncio.sleep(3 * WATCH_AFTER_S)
    run.cancel()
    try:
        await run
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the server's cancellation was swallowed")


async def test_release_completes_even_when_the_handler_is_cancelled() -> None:
    loop = _loop()
    done = asyncio.Event()

    async def work() -> None:
        await asyncio.sleep(0.01)
        done.set()

    async def handler() -> None:
        await loop.release(work())

    task = asyncio.ensure_future(handler())
    await asyncio.sleep(0)
    task.cancel()
    await loop.drain()
    assert done.is_set() and not loop.releases
