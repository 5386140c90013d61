"""A local stand-in for the Fly.io Sprites API, at the network boundary of the ``sprites-py`` SDK.

``openenv-sprites`` talks to ``https://api.sprites.dev`` only through ``sprites-py``; pointing its
``api_base_url`` here replaces the cloud and nothing else. What it implements is what
``SpritesProvider`` uses, with the SDK's wire formats:

* ``POST /v1/sprites`` creates a sprite (a bearer token is required on every call, 401 otherwise)
  and answers its info, whose ``url`` is this server's ``/_sprite/<name>`` (the sprite's user URL);
* ``WS /v1/sprites/<name>/exec?cmd=...&dir=...&env=K=V`` runs the command on this machine and
  streams it in the SDK's binary framing (first byte 1 stdout, 2 stderr, 3 exit code);
* ``PUT /v1/sprites/<name>/services/<svc>`` starts a service (NDJSON log events answered),
  ``GET`` reports it, ``DELETE /v1/sprites/<name>`` stops its services and deletes it (204);
* ``/_sprite/<name>/...`` forwards HTTP and ``/ws`` WebSockets to the service's port, refusing
  requests without the token as the real sprite URL does.

The "machine" is this host: a sprite's ports are virtual, so the service's ``http_port`` (and the
same number in its arguments) is mapped to a free loopback port. Its network has no internet:
``git`` reaches ``https://git.standin.test/<repo>`` through a local mirror (``url.insteadOf``), and
``curl`` of uv's installer gets an installer that links this host's ``uv``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

__all__ = ["GIT_HOST", "SpritesStandin"]

GIT_HOST = "https://git.standin.test/"
_CURL_SHIM = """#!/bin/sh
# The sprite has no internet: uv's installer is replaced by one that links the host's uv.
out=""
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; shift; fi
  shift
done
[ -n "$out" ] || { echo "curl stand-in: only 'curl URL -o FILE' is supported" >&2; exit 2; }
printf '#!/bin/sh\\nmkdir -p "$UV_UNMANAGED_INSTALL" && ln -sf %s "$UV_UNMANAGED_INSTALL/uv"\\n' "{uv}" > "$out"
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class _Sprite:
    name: str
    labels: list[str]
    services: dict[str, tuple[asyncio.subprocess.Process, int]] = field(default_factory=dict)


class SpritesStandin:
    """The Sprites API on 127.0.0.1 (``app`` is the ASGI app; run it with uvicorn)."""

    def __init__(self, token: str, mirrors: dict[str, Path], base_url: str) -> None:
        self.token, self.mirrors, self.base_url = token, mirrors, base_url.rstrip("/")
        self.sprites: dict[str, _Sprite] = {}
        self.deleted: list[str] = []
        self.commands: list[list[str]] = []
        self._bin = Path(tempfile.mkdtemp(prefix="sprites-standin-bin-"))
        uv = shutil.which("uv")
        if uv is None:
            raise RuntimeError("the Sprites stand-in needs uv on PATH (its sprites 'install' the host's uv)")
        shim = self._bin / "curl"
        shim.write_text(_CURL_SHIM.replace("{uv}", uv))
        shim.chmod(0o755)
        self.app = Starlette(routes=[
            Route("/v1/sprites", self.create, methods=["POST"]),
            Route("/v1/sprites/{name}", self.delete, methods=["DELETE"]),
            WebSocketRoute("/v1/sprites/{name}/exec", self.exec),
            Route("/v1/sprites/{name}/services/{svc}", self.service, methods=["PUT", "GET"]),
            Route("/_sprite/{name}/{path:path}", self.forward, methods=["GET", "POST"]),
            WebSocketRoute("/_sprite/{name}/ws", self.forward_ws),
        ])

    def _authorized(self, headers: Any) -> bool:
        return bool(headers.get("authorization") == f"Bearer {self.token}")

    def _machine_env(self, extra: dict[str, str]) -> dict[str, str]:
        env = {**os.environ, "PATH": f"{self._bin}{os.pathsep}{os.environ.get('PATH', '')}", **extra}
        # The sprite's only "internet": its git host, served from local mirrors.
        env["GIT_CONFIG_COUNT"] = str(len(self.mirrors))
        for i, (repo, path) in enumerate(self.mirrors.items()):
            env[f"GIT_CONFIG_KEY_{i}"] = f"url.{path.as_uri()}.insteadOf"
            env[f"GIT_CONFIG_VALUE_{i}"] = f"{GIT_HOST}{repo}"
        return env

    async def create(self, request: Request) -> Response:
        if not self._authorized(request.headers):
            return PlainTextResponse("unauthorized", status_code=401)
        body = await request.json()
        name = str(body["name"])
        if name in self.sprites:
            return PlainTextResponse(f"sprite {name} exists", status_code=409)
        self.sprites[name] = _Sprite(name=name, labels=list(body.get("labels") or []))
        return JSONResponse({"id": f"sprite-{name}", "name": name, "status": "running",
                             "url": f"{self.base_url}/_sprite/{name}", "labels": self.sprites[name].labels})

    async def delete(self, request: Request) -> Response:
        if not self._authorized(request.headers):
            return PlainTextResponse("unauthorized", status_code=401)
        sprite = self.sprites.pop(request.path_params["name"], None)
        if sprite is None:
            return PlainTextResponse("not found", status_code=404)
        for proc, _port in sprite.services.values():
            if proc.returncode is not None:
                continue
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), timeout=10)
            except TimeoutError:
                proc.kill()
                await asyncio.wait_for(proc.wait(), timeout=10)
        self.deleted.append(sprite.name)
        return Response(status_code=204)

    async def exec(self, ws: WebSocket) -> None:
        if not self._authorized(ws.headers) or ws.path_params["name"] not in self.sprites:
            await ws.close(code=1008)
            return
        await ws.accept()
        query = ws.query_params
        args = query.getlist("cmd")
        env = dict(item.split("=", 1) for item in query.getlist("env"))
        self.commands.append(args)
        try:
            proc = await asyncio.create_subprocess_exec(
                *args, cwd=query.get("dir") or None, env=self._machine_env(env), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await asyncio.wait_for(proc.communicate(), timeout=300)
            code = proc.returncode or 0
        except (TimeoutError, OSError) as exc:
            out, err, code = b"", f"{type(exc).__name__}: {exc}".encode(), 127
        if out:
            await ws.send_bytes(b"\x01" + out)
        if err:
            await ws.send_bytes(b"\x02" + err)
        await ws.send_bytes(bytes([3, code & 0xFF]))
        await ws.close()

    async def service(self, request: Request) -> Response:
        if not self._authorized(request.headers):
            return PlainTextResponse("unauthorized", status_code=401)
        sprite = self.sprites.get(request.path_params["name"])
        svc = request.path_params["svc"]
        if sprite is None:
            return PlainTextResponse("not found", status_code=404)
        if request.method == "GET":
            if svc not in sprite.services:
                return PlainTextResponse("not found", status_code=404)
            proc, _ = sprite.services[svc]
            status = "running" if proc.returncode is None else "stopped"
            return JSONResponse({"name": svc, "cmd": "", "state": {"name": svc, "status": status}})
        body = await request.json()
        host_port = _free_port()
        virtual = str(body.get("http_port", ""))
        # The sprite's port is virtual: the same number in the command is this host's free port.
        argv = [str(body["cmd"]), *[host_port.__str__() if a == virtual else str(a) for a in body.get("args", [])]]
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=body.get("dir"), env=self._machine_env(dict(body.get("env") or {})),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        sprite.services[svc] = (proc, host_port)
        events = [{"type": "started", "data": f"{svc} started"}]
        await asyncio.sleep(0.5)
        if proc.returncode is not None:
            events.append({"type": "exit", "exit_code": proc.returncode})
        return PlainTextResponse("\n".join(json.dumps(e) for e in events) + "\n")

    def _port(self, name: str) -> int | None:
        sprite = self.sprites.get(name)
        if sprite is None or not sprite.services:
            return None
        return next(iter(sprite.services.values()))[1]

    async def forward(self, request: Request) -> Response:
        port = self._port(request.path_params["name"])
        if not self._authorized(request.headers):
            return PlainTextResponse("unauthorized", status_code=401)
        if port is None:
            return PlainTextResponse("no service", status_code=502)
        try:
            async with httpx.AsyncClient(timeout=10) as client:
                upstream = await client.request(request.method, f"http://127.0.0.1:{port}/{request.path_params['path']}",
                                                content=await request.body(),
                                                headers={"content-type": request.headers.get("content-type", "")})
        except httpx.HTTPError:
            return PlainTextResponse("service not reachable", status_code=502)
        return Response(upstream.content, status_code=upstream.status_code,
                        media_type=upstream.headers.get("content-type"))

    async def forward_ws(self, ws: WebSocket) -> None:
        port = self._port(ws.path_params["name"])
        if not self._authorized(ws.headers) or port is None:
            await ws.close(code=1008)
            return
        await ws.accept()
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws", max_size=None) as upstream:
            async def down() -> None:
                async for message in upstream:
                    if isinstance(message, bytes):
                        await ws.send_bytes(message)
                    else:
                        await ws.send_text(message)

            task = asyncio.create_task(down())
            try:
                while True:
                    message = await ws.receive()
                    if message["type"] == "websocket.disconnect":
                        break
                    if message.get("text") is not None:
                        await upstream.send(message["text"])
                    elif message.get("bytes") is not None:
                        await upstream.send(message["bytes"])
            finally:
                task.cancel()


if __name__ == "__main__":  # pragma: no cover - manual use: python sprites_standin.py TOKEN PORT
    import uvicorn

    port = int(sys.argv[2])
    uvicorn.run(SpritesStandin(sys.argv[1], {}, f"http://127.0.0.1:{port}").app, host="127.0.0.1", port=port)
