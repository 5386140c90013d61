"""The misbehaving load of ``bench.hardening``, run as a process of its own.

``python -m bench.misbehave --port P --hang N --sleep M [--seconds T]`` drives sessions of
``bench.hardening:MisbehavingEnv`` over ``/ws`` on 127.0.0.1, in rounds commanded on stdin:

* ``start`` opens ``N + M`` sessions; ``N`` send one step that blocks in the env until released,
  ``M`` step in a loop, each step sleeping 0.5 s in the env, their first steps spread over 0.5 s.
  Once every session is open and every hung step sent it prints ``started``.
* ``stop`` sends a ``release`` step on a session of its own (which wakes the hung calls), waits a
  bounded time for the hung and sleeping replies, closes every connection and prints ``stopped``:
  the server is back to no misbehaving session, ready for a quiet round.

End of stdin, SIGTERM (the benchmark ends it by PID) or ``T`` seconds after start, whatever happens,
end a running round the same way and exit.

It runs apart from the measuring client on purpose: driving these sessions from threads of the
measuring process (websockets' sync client has a thread per connection) made them compete with
the measuring thread for that process's GIL and CPU, so the benchmark partly timed itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import warnings
from typing import Any

__all__ = ["SLEEP_S", "main"]

#: How long a sleeping step sleeps in the env (``bench.hardening.MisbehavingEnv``).
SLEEP_S = 0.5
#: Seconds allowed for connecting (per connection) and for each reply not expected to hang.
_REPLY_TIMEOUT_S = 30.0


async def _session(uri: str) -> Any:
    from websockets.asyncio.client import connect

    # No client keepalive pings: the server's own pings are part of what is measured, ours not.
    ws = await connect(uri, open_timeout=_REPLY_TIMEOUT_S, compression=None, proxy=None,
                       ping_interval=None)
    await ws.send('{"type":"reset","data":{}}')
    await asyncio.wait_for(ws.recv(), _REPLY_TIMEOUT_S)
    return ws


def _step(message: str) -> str:
    return json.dumps({"type": "step", "data": {"message": message}})


async def _sleeper(ws: Any, stop: asyncio.Event, delay: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), delay)
        return
    except TimeoutError:
        pass
    while not stop.is_set():  # bounded: each step takes 0.5 s, and ``stop`` is set at the deadline
        await ws.send(_step("sleep"))
        await asyncio.wait_for(ws.recv(), _REPLY_TIMEOUT_S)


class _Round:
    """One round of misbehaving sessions: opened by ``start``, released and closed by ``stop``."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.stop_event = asyncio.Event()
        self.hung: list[Any] = []
        self.sleepers: list[Any] = []
        self.tasks: list[asyncio.Task[None]] = []

    async def start(self, hang: int, sleep: int) -> None:
        self.hung = [await _session(self.uri) for _ in range(hang)]
        self.sleepers = [await _session(self.uri) for _ in range(sleep)]
        for ws in self.hung:
            await ws.send(_step("hang"))
        # Staggered over one sleep period, as independent sessions would be: started together, their
        # steps would reach the server in bursts, which costs the bystander the whole burst at once.
        self.tasks = [asyncio.create_task(_sleeper(ws, self.stop_event, SLEEP_S * i / len(self.sleepers)))
                      for i, ws in enumerate(self.sleepers)]

    async def stop(self) -> None:
        self.stop_event.set()
        releaser = await _session(self.uri)
        try:
            await releaser.send(_step("release"))
            await asyncio.wait_for(releaser.recv(), _REPLY_TIMEOUT_S)
            # The hung steps now return; wait for them (bounded) so that their sessions close idle.
            await asyncio.wait_for(asyncio.gather(*(ws.recv() for ws in self.hung)), _REPLY_TIMEOUT_S)
            await asyncio.wait_for(asyncio.gather(*self.tasks), _REPLY_TIMEOUT_S)
        finally:
            for ws in [*self.hung, *self.sleepers, releaser]:
                await ws.close()


async def _run(port: int, hang: int, sleep: int, seconds: float) -> int:
    uri = f"ws://127.0.0.1:{port}/ws"
    loop = asyncio.get_running_loop()
    end = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, end.set)
    loop.call_later(seconds, end.set)
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    current: _Round | None = None
    try:
        while not end.is_set():
            read = asyncio.ensure_future(commands.readline())
            ended = asyncio.ensure_future(end.wait())
            await asyncio.wait({read, ended}, return_when=asyncio.FIRST_COMPLETED)
            ended.cancel()
            if not read.done():
                read.cancel()
                break
            command = read.result().strip()
            if command == b"start" and current is None:
                current = _Round(uri)
                await current.start(hang, sleep)
                print("started", flush=True)
            elif command == b"stop" and current is not None:
                await current.stop()
                current = None
                print("stopped", flush=True)
            elif not command:  # end of stdin: the benchmark is done (or gone)
                break
    finally:
        if current is not None:
            await current.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.misbehave", description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hang", type=int, default=4, help="sessions whose one step blocks until released")
    ap.add_argument("--sleep", type=int, default=4, help="sessions stepping in a loop, 0.5 s per step")
    ap.add_argument("--seconds", type=float, default=300.0, help="end by itself after this long")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    try:
        return asyncio.run(_run(args.port, args.hang, args.sleep, args.seconds))
    except Exception as exc:  # the benchmark sees no "started"/"stopped" line and says so
        print(f"bench.misbehave: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
