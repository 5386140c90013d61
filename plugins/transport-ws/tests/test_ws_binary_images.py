"""The ``binary_images`` extension: an observation's ``Image`` fields as binary frames after its
JSON frame, only on a connection that asked (docs/protocol.md §12, binary_images)."""

from __future__ import annotations

import asyncio
import base64
import struct
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from ws_support import LiveServer, live_server, recv, rpc, send, ws_open

from openenv.client import GenericEnvClient
from openenv.env import Environment
from openenv.types import Action, Image, Observation, State
from openenv_transport_ws.client import WebSocketConnector


class PaintAction(Action):
    shade: int = 0


class PaintObservation(Observation):
    screen: Image | None = None
    #: An undeclared string that happens to be a data URL: it always stays in the JSON.
    legacy: str = ""


def frame(shade: int) -> bytes:
    """A 5x3 RGB PNG with one coloured pixel, written here (this package's tests run without numpy)."""
    width, height = 5, 3
    rows = b""
    for y in range(height):
        row = bytearray(3 * width)
        if y == 1:
            row[6:9] = bytes((shade, 255 - shade, 7))
        rows += b"\x00" + bytes(row)  # filter byte 0 (none) per scanline

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


LEGACY = str(Image.from_bytes(frame(1)))


class PaintEnv(Environment[PaintAction, PaintObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PaintObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return PaintObservation(screen=frame(0), legacy=LEGACY)

    def step(self, action: PaintAction, **kwargs: Any) -> PaintObservation:
        self._state.step_count += 1
        return PaintObservation(screen=frame(action.shade) if action.shade else None, legacy=LEGACY,
                                reward=float(action.shade))

    @property
    def state(self) -> State:
        return self._state


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server(PaintEnv, max_sessions=4) as srv:
        yield srv


def png(shade: int) -> bytes:
    return Image.from_bytes(frame(shade)).data


async def test_without_the_extension_images_stay_in_the_json(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "reset", "data": {}})
    assert "binary" not in reply
    assert reply["data"]["observation"]["screen"] == "data:image/png;base64," + base64.b64encode(png(0)).decode()
    # Asking for other extensions does not bring binary frames either.
    await rpc(ws, {"type": "hello", "data": {"want": ["step_batch"]}})
    assert isinstance((await rpc(ws, {"type": "step", "data": {"shade": 9}}))["data"]["observation"]["screen"], str)
    await ws.close()


async def test_a_negotiated_connection_gets_each_image_as_a_binary_frame(server: LiveServer) -> None:
    ws = await ws_open(server)
    hello = await rpc(ws, {"type": "hello", "data": {"want": ["binary_images", "step_batch"]}})
    assert hello["data"]["extensions"] == ["step_batch", "binary_images"]
    reply = await rpc(ws, {"type": "reset", "data": {}})
    assert reply["binary"] == 1
    assert reply["data"]["observation"]["screen"] == {"$image": 0, "media_type": "image/png"}
    assert reply["data"]["observation"]["legacy"] == LEGACY  # not a declared Image: unchanged
    assert await asyncio.wait_for(ws.recv(), 10) == png(0)
    # The hot path (a bare step frame) and a step without an image.
    step = await rpc(ws, {"type": "step", "data": {"shade": 40}})
    assert step["binary"] == 1 and await asyncio.wait_for(ws.recv(), 10) == png(40)
    none = await rpc(ws, {"type": "step", "data": {"shade": 0}})
    assert "binary" not in none and none["data"]["observation"]["screen"] is None
    # A batch: the frames of all its observations, numbered across the frame, in order.
    await send(ws, {"type": "step_batch", "data": {"actions": [{"shade": 5}, {"shade": 0}, {"shade": 6}]}})
    batch = await recv(ws)
    assert batch["binary"] == 2
    assert [op["observation"]["screen"] for op in batch["data"]] == [
        {"$image": 0, "media_type": "image/png"}, None, {"$image": 1, "media_type": "image/png"}]
    assert [await asyncio.wait_for(ws.recv(), 10) for _ in range(2)] == [png(5), png(6)]
    # The connection goes on with ordinary frames afterwards.
    assert (await rpc(ws, {"type": "state"}))["data"]["step_count"] == 5
    await ws.close()


async def test_the_client_puts_the_images_back(server: LiveServer) -> None:
    plain = GenericEnvClient(server.url, connector=WebSocketConnector())
    binary = GenericEnvClient(server.url, connector=WebSocketConnector(), binary_images=True)
    try:
        for client in (plain, binary):
            await client.reset()
        assert "binary_images" in await binary.extensions() and "binary_images" not in await plain.extensions()
        # step_batch sends the client's own hello again: binary frames stay granted.
        for client in (plain, binary):
            first = await client.step({"shade": 3})
            batch = await client.step_batch([{"shade": 4}, {"shade": 0}])
            assert first.observation["screen"] == str(Image.from_bytes(png(3)))
            assert [r.observation["screen"] for r in batch] == [str(Image.from_bytes(png(4))), None]
        assert "binary_images" in await binary.extensions()
    finally:
        await plain.close()
        await binary.close()
