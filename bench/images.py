"""``python -m bench.images [--quick] [--out PATH]``: image observations on ``/ws``, with and without
binary frames (issue 30's "image observation transfer" row).

One server (the kernel's live server, ws transport, on 127.0.0.1) plays an env whose observation
is an ``Image`` plus a small JSON field, for two kinds of frame: ``pattern``, Atari's size (210 x
160 RGB) with a moving pattern that PNG compresses to ~3 kB (as game screens do), and ``noise``,
the same size of random pixels (~100 kB, as a photo-like screenshot). The kernel client steps it, one session at a
time, twice per round in rotated order: once plain (the image as a base64 data URL inside the
JSON frame, what every client gets by default) and once with ``EnvClient(binary_images=True)``
(the ``binary_images`` extension: the PNG bytes as a binary frame after the JSON frame,
docs/protocol.md §12, binary_images). Per frame it reports the bytes on the wire (the JSON frame's UTF-8
length plus the binary frames; WebSocket framing overhead left out, the same few bytes either
way) and the round-trip time of a step as the client sees it (send, server step and encode,
receive, decode back to a data URL). Prints JSON (and writes it to ``--out``); nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from openenv.env import Environment
from openenv.images import Image, split_images
from openenv.types import Action, Observation, State, observation_payload
from openenv.wire import dumps

__all__ = ["FrameEnv", "main", "measure"]

HEIGHT, WIDTH = 210, 160


class FrameAction(Action):
    t: int = 0


class FrameObservation(Observation):
    screen: Image | None = None
    score: int = 0


def _frame(t: int, kind: str = "pattern") -> np.ndarray:
    if kind == "noise":
        return np.random.default_rng(t).integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    pixels = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    pixels[..., 0] = (x * 3 + t * 5) % 256
    pixels[..., 1] = ((y // 8 + t) % 2) * 180
    pixels[..., 2] = ((x // 16 + y // 16 + t) % 3) * 90
    return pixels


#: Encoded once per kind: the benchmark measures the transfer, not the PNG encoder.
KINDS = {kind: [Image.from_array(_frame(t, kind)) for t in range(16)] for kind in ("pattern", "noise")}
_FRAMES = KINDS["pattern"]


class FrameEnv(Environment[FrameAction, FrameObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FrameObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return FrameObservation(screen=_FRAMES[0])

    def step(self, action: FrameAction, **kwargs: Any) -> FrameObservation:
        self._state.step_count += 1
        return FrameObservation(screen=_FRAMES[action.t % len(_FRAMES)], score=action.t, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


def wire_bytes(binary: bool, frames: list[Image]) -> float:
    """Mean bytes per observation frame on the wire (JSON text + binary frames), over the frames."""
    sizes = []
    for image in frames:
        frame = {"type": "observation", "data": observation_payload(FrameObservation(screen=image, score=1))}
        blobs = split_images(frame) if binary else []
        sizes.append(len(dumps(frame).encode()) + sum(len(b) for b in blobs))
    return statistics.fmean(sizes)


async def _steps(url: str, binary: bool, steps: int) -> list[float]:
    from openenv.client import GenericEnvClient

    client = GenericEnvClient(url, transport="ws", binary_images=binary)
    try:
        await client.reset()
        for t in range(20):  # warm-up
            await client.step({"t": t})
        times = []
        for t in range(steps):
            started = time.perf_counter()
            result = await client.step({"t": t})
            times.append(time.perf_counter() - started)
            if not str(result.observation["screen"]).startswith("data:image/png;base64,"):
                raise RuntimeError("the client did not get the image back as a data URL")
        return times
    finally:
        await client.close()


def measure_kind(kind: str, steps: int, rounds: int) -> dict[str, Any]:
    """Both ways for one kind of frame, rounds in rotated order."""
    from openenv.testing import live_server

    global _FRAMES
    _FRAMES = KINDS[kind]  # the served env runs in this process (the live server's thread)
    times: dict[str, list[float]] = {"base64 in JSON": [], "binary frames": []}
    with live_server(FrameEnv, transports=["ws"], max_sessions=2) as server:
        for r in range(rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            for binary in order:
                key = "binary frames" if binary else "base64 in JSON"
                times[key] += asyncio.run(_steps(server.url, binary, steps))
    rows = {}
    for key, binary in (("base64 in JSON", False), ("binary frames", True)):
        samples = sorted(times[key])
        rows[key] = {"bytes_per_frame": round(wire_bytes(binary, KINDS[kind])),
                     "ms_per_frame_p50": round(statistics.median(samples) * 1000, 3),
                     "ms_per_frame_p90": round(samples[int(len(samples) * 0.9)] * 1000, 3),
                     "steps": len(samples)}
    plain, binary_row = rows["base64 in JSON"], rows["binary frames"]
    return {"frame": f"{kind}: {WIDTH}x{HEIGHT} RGB PNG", "rows": rows,
            "bytes_ratio": round(binary_row["bytes_per_frame"] / plain["bytes_per_frame"], 3),
            "ms_ratio_p50": round(binary_row["ms_per_frame_p50"] / plain["ms_per_frame_p50"], 3)}


def measure(steps: int, rounds: int) -> dict[str, Any]:
    return {"benchmark": "images", "kinds": {kind: measure_kind(kind, steps, rounds) for kind in KINDS}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.images", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (CI)")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args(argv)
    result = measure(steps=100 if args.quick else 500, rounds=2 if args.quick else 4)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
