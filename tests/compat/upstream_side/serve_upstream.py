"""Serve ``echo_env`` with upstream's ``create_app`` and uvicorn, on 127.0.0.1 only.

Runs in the upstream venv. One process can serve several apps (each its own ``create_app`` with its
own ``max_concurrent_envs``) on several ports, because importing upstream costs seconds (it pulls
in gradio) and tests want a roomy server and a one-slot server::

    python serve_upstream.py --ready-file F --app main:4 --app single:1 [--app name:max:port]

Port 0 (the default) lets the OS choose. Once every app accepts connections the process writes
``{"pid": <pid>, "ports": {"main": <port>, ...}}`` to the ready file (atomically), then serves until
it is terminated.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
from collections.abc import Iterator

import uvicorn
from echo_env import EchoAction, EchoEnvironment, EchoObservation

from openenv.core.env_server.http_server import create_app

HOST = "127.0.0.1"


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: a crashed test run never leaves this server behind (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() == 1:  # the parent died before the call above
        raise SystemExit(1)


def _parse_app(spec: str) -> tuple[str, int, int]:
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"--app wants NAME:MAX[:PORT], got {spec!r}")
    port = int(parts[2]) if len(parts) == 3 else 0
    return parts[0], int(parts[1]), port


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to ``_main`` (one handler stops every app)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEADDR lets a test restart a server on the port of one it just killed.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.set_inheritable(True)
    return sock


async def _main(apps: list[tuple[str, int, int]], ready_file: str) -> None:
    servers: list[_Server] = []
    tasks = []
    ports: dict[str, int] = {}
    loop = asyncio.get_running_loop()

    def stop_all() -> None:
        for s in servers:
            s.should_exit = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_all)
    for name, max_envs, port in apps:
        app = create_app(
            EchoEnvironment, EchoAction, EchoObservation,
            env_name="echo", max_concurrent_envs=max_envs,
        )
        sock = _bind(port)
        ports[name] = sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        server = _Server(config)
        servers.append(server)
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
    for _ in range(3000):  # bounded: 30 s
        if all(s.started for s in servers) or any(t.done() for t in tasks):
            break
        await asyncio.sleep(0.01)
    if not all(s.started for s in servers):
        print("upstream server failed to start", file=sys.stderr)
        stop_all()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise SystemExit(1)
    tmp = ready_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "ports": ports}, f)
    os.replace(tmp, ready_file)
    await asyncio.gather(*tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--app", dest="apps", type=_parse_app, action="append", required=True)
    parser.add_argument("--die-with-parent", action="store_true",
                        help="ask Linux to SIGTERM this server when its parent (pytest) dies")
    args = parser.parse_args()
    if args.die_with_parent:
        _die_with_parent()
    asyncio.run(_main(args.apps, args.ready_file))


if __name__ == "__main__":
    main()
