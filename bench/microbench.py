"""App-level cost of one step, without sockets: our ASGI app vs the bare echo app, in-process.

``python -m bench.microbench [--steps 50000] [--profile]``

The socket benchmark mixes what we control (the app: transport, sessions, validation,
serialisation) with what we only choose (event loop, uvicorn, the WebSocket implementation, the
kernel's TCP). This isolates the first: each app is called as uvicorn would call it, with
``receive``/``send`` replaced by two tiny in-memory functions, and a connection of N ``step``
frames is timed (CPU time of this process). ``receive``/``send`` cost the same for every app,
so the differences are the apps' own. It is deterministic enough to compare patches on a busy
machine, where the socket benchmark's absolute numbers wander.

Variants: ``bare`` (the bare echo app), ``ours-sync``/``ours-async`` through the whole Starlette
app (routing and its exception wrapper included), and ``ours-sync-direct`` (the ws transport
called directly, to show what Starlette adds). ``--profile`` prints cProfile's view of
``ours-sync``: function calls per step, and where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench import targets

__all__ = ["main", "measure"]

App = Callable[..., Awaitable[None]]


async def _drive(app: App, steps: int, reset_first: bool = True) -> tuple[float, int]:
    """One WebSocket connection of ``steps`` step frames; returns (CPU seconds, replies)."""
    frames: list[dict[str, Any]] = [{"type": "websocket.connect"}]
    if reset_first:
        frames.append({"type": "websocket.receive", "text": targets.RESET_FRAME})
    step = {"type": "websocket.receive", "text": targets.STEP_FRAME}
    frames.extend([step] * steps)
    frames.append({"type": "websocket.receive", "text": targets.CLOSE_FRAME})
    frames.reverse()
    pop = frames.pop
    replies = 0

    async def receive() -> dict[str, Any]:
        return pop() if frames else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        nonlocal replies
        if message["type"] == "websocket.send":
            replies += 1

    scope = {"type": "websocket", "path": "/ws", "raw_path": b"/ws", "query_string": b"", "headers": [],
             "scheme": "ws", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1), "root_path": "",
             "subprotocols": [], "asgi": {"version": "3.0", "spec_version": "2.4"}, "state": {},
             "extensions": {"websocket.http.response": {}}}
    t0 = time.process_time()
    await app(scope, receive, send)
    return time.process_time() - t0, replies


def _apps() -> dict[str, App]:
    from bench.bare_echo import build_app
    from openenv.server import create_app

    templates = {"ws": {"reset": '{"type":"observation"}', "step_parts": ["{", "}"], "step_sep": '"step":'}}
    apps: dict[str, App] = {"bare": build_app(templates)}
    for key, env in (("ours-sync", "echo"), ("ours-async", "echo_async")):
        app = create_app(env, max_sessions=4, transports=["ws"])
        apps[key] = app
        if key == "ours-sync":
            apps["ours-sync-direct"] = app.state.ctx.transports[0]
    return apps


def measure(steps: int, repeats: int = 5) -> dict[str, dict[str, float]]:
    """Best-of-``repeats`` µs per step of each variant (best: the least disturbed by the machine)."""
    apps = _apps()
    out: dict[str, dict[str, float]] = {}

    async def run() -> None:
        for name, app in apps.items():
            await _drive(app, 1000)  # warm caches, build lazy validators
            best = None
            for _ in range(repeats):
                cpu, replies = await _drive(app, steps)
                assert replies == steps + 1, (name, replies)
                per = cpu / steps * 1e6
                best = per if best is None else min(best, per)
            out[name] = {"us_per_step": round(best or 0.0, 3)}

    asyncio.run(run())
    bare = out["bare"]["us_per_step"]
    for row in out.values():
        row["minus_bare_us"] = round(row["us_per_step"] - bare, 3)
    return out


def profile(steps: int, key: str = "ours-sync", top: int = 30) -> str:
    """cProfile of ``steps`` steps of ``key``: calls per step and the heaviest functions."""
    app = _apps()[key]

    async def run() -> None:
        await _drive(app, 1000)
        prof = cProfile.Profile()
        prof.enable()
        await _drive(app, steps)
        prof.disable()
        stream = io.StringIO()
        stats = pstats.Stats(prof, stream=stream)
        total_calls = stats.total_calls  # type: ignore[attr-defined]
        stream.write(f"\n{key}: {total_calls / steps:.1f} Python function calls per step\n")
        stats.sort_stats("tottime").print_stats(top)
        result.append(stream.getvalue())

    result: list[str] = []
    asyncio.run(run())
    return result[0]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.microbench", description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--profile", action="store_true", help="also print a cProfile of ours-sync")
    p.add_argument("--json", action="store_true", help="print JSON only")
    args = p.parse_args(argv)
    result = measure(args.steps, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"app-level CPU per step over {args.steps} steps (best of {args.repeats}), no sockets:")
        for name, row in result.items():
            print(f"  {name:<18} {row['us_per_step']:7.2f} µs   (+{row['minus_bare_us']:.2f} µs over bare)")
    if args.profile:
        print(profile(min(args.steps, 20_000)))


if __name__ == "__main__":
    main()
