"""Upstream ``openenv==0.10.0`` serving the echo env written in its own API (runs in its own venv).

``<upstream venv>/bin/python bench/upstream_echo.py --ready-file R.json [--max-sessions N]
[--stack-file S.json]``

This file is executed by upstream's interpreter, where ``openenv`` is upstream's package; it
imports nothing from this repository. The env behaves like ours (``envs/echo``): reset →
``"ready"``, reward 0.0; step → echo, reward ``0.1 × len``, metadata ``{original_message, step}``;
safe for concurrent sessions. It is served the way upstream's own env servers are
(``create_app(...)`` then uvicorn with its defaults, binding host/port itself as ``uvicorn.run``
does), except that logging is quieted to ``warning`` like every other server in the benchmark.
The ready file gets ``{"host", "port", "pid"}`` once connections are accepted; the stack file the
resolved uvicorn stack.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from typing import Any

import uvicorn
from pydantic import Field

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

__all__ = ["BenchEchoAction", "BenchEchoEnvironment", "BenchEchoObservation", "main"]


class BenchEchoAction(Action):
    """The message to echo back."""

    message: str = Field(..., min_length=1, description="Message to echo back")


class BenchEchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, ge=0, description="Length of the echoed message")


class BenchEchoEnvironment(Environment):
    """Echo env in upstream's API; instances share nothing, so concurrent sessions are safe."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> BenchEchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return BenchEchoObservation(echoed_message="ready", message_length=0, reward=0.0, done=False)

    def step(self, action: BenchEchoAction, timeout_s: float | None = None, **kwargs: Any) -> BenchEchoObservation:  # type: ignore[override]
        self._state.step_count += 1
        message = action.message
        return BenchEchoObservation(
            echoed_message=message, message_length=len(message), reward=0.1 * len(message), done=False,
            metadata={"original_message": message, "step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _stack(config: Any) -> dict[str, Any]:
    def name(obj: Any) -> str | None:
        return None if obj is None else f"{obj.__module__}.{obj.__qualname__}"

    import websockets

    return {
        "uvicorn": uvicorn.__version__, "websockets": websockets.__version__,
        "loop": name(type(asyncio.get_running_loop())), "http": name(config.http_protocol_class),
        "ws": name(config.ws_protocol_class), "ws_per_message_deflate": config.ws_per_message_deflate,
        "ws_max_size": config.ws_max_size, "ws_ping_interval": config.ws_ping_interval,
    }


async def _serve(max_sessions: int, ready_file: str, stack_file: str | None) -> None:
    app = create_app(BenchEchoEnvironment, BenchEchoAction, BenchEchoObservation, env_name="echo",
                     max_concurrent_envs=max_sessions)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    for _ in range(6000):  # bounded: 60 s
        if server.started or task.done():
            break
        await asyncio.sleep(0.01)
    if server.started:
        if stack_file:
            _write_json(stack_file, _stack(config))
        port = server.servers[0].sockets[0].getsockname()[1]
        _write_json(ready_file, {"host": "127.0.0.1", "port": port, "pid": os.getpid()})
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--stack-file")
    parser.add_argument("--max-sessions", type=int, default=300)
    args = parser.parse_args()
    asyncio.run(_serve(args.max_sessions, args.ready_file, args.stack_file))


if __name__ == "__main__":
    main()
