"""A local, stateful stand-in for the ACA sandbox data plane, over HTTPS on 127.0.0.1.

It serves the paths ``azure-containerapps-sandbox`` calls, with a self-signed certificate (the SDK
insists on ``https://``), checks the bearer token the SDK's ``BearerTokenCredentialPolicy`` sends,
and moves sandboxes through *Creating* → *Running* and *Deleting* → gone as it is polled, so the
SDK's pollers end. ``executeShellCommand`` runs the command for real on this machine (in its own
process group, killed when the sandbox is deleted); a port's URL is ``http://127.0.0.1:<port>``.
``rate_limit_creates`` first creates are answered 429 with ``Retry-After: 1``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

from azure.core.credentials import AccessToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openenv.testing import StandIn

__all__ = ["TOKEN", "FakeAca", "FakeCredential"]

#: The access token the fake accepts (what the tests' ``FakeCredential`` hands out).
TOKEN = "fake-aad-token-0123"

GROUP = "/subscriptions/{sub}/resourceGroups/{rg}/sandboxGroups/{sg}"


class FakeCredential:
    """An azure-core ``TokenCredential`` that hands out a fixed token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        return AccessToken(self.token, int(time.time()) + 3600)


class FakeAca:
    """``with FakeAca(token, cert, key) as fake:`` then ``ACA_ENDPOINT=fake.url``."""

    def __init__(self, token: str, cert: str, key: str, *, extra_env: dict[str, str] | None = None) -> None:
        self.token, self.cert, self.key = token, cert, key
        self.extra_env = extra_env or {}
        self.rate_limit_creates = 0
        self.create_attempts = 0
        self.sandboxes: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.url = ""
        self.app = Starlette(routes=[
            Route(GROUP + "/sandboxes", self.create, methods=["PUT"]),
            Route(GROUP + "/sandboxes", self.list, methods=["GET"]),
            Route(GROUP + "/sandboxes/{sid}", self.get, methods=["GET"]),
            Route(GROUP + "/sandboxes/{sid}", self.delete, methods=["DELETE"]),
            Route(GROUP + "/sandboxes/{sid}/executeShellCommand", self.execute, methods=["POST"]),
            Route(GROUP + "/sandboxes/{sid}/ports/add", self.add_port, methods=["POST"]),
        ])

    def __enter__(self) -> FakeAca:
        self._stand_in = StandIn(self.app, "fake aca", certfile=self.cert, keyfile=self.key)
        self.url = self._stand_in.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for record in list(self.sandboxes.values()):
            self._kill(record)
        self._stand_in.stop()

    # -- helpers ----------------------------------------------------------------------------------

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return JSONResponse({"error": {"code": "InvalidAuthenticationToken",
                                           "message": "The access token is invalid."}}, status_code=401)
        return None

    @staticmethod
    def _not_found(sid: str) -> Response:
        return JSONResponse({"error": {"code": "NotFound", "message": f"Sandbox {sid} not found"}},
                            status_code=404)

    @staticmethod
    def _dto(record: dict[str, Any]) -> dict[str, Any]:
        return {"id": record["id"], "state": record["state"], "labels": record["labels"],
                "environment": {k: "***" for k in record["environment"]},
                "resources": record["body"].get("resources"), "ports": record["ports"]}

    @staticmethod
    def _kill(record: dict[str, Any]) -> None:
        for pgid in record["groups"]:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        record["groups"] = []

    def kill_server(self, sid: str) -> None:
        """Kill what runs in a sandbox and mark it stopped, behind the provider's back."""
        self._kill(self.sandboxes[sid])
        self.sandboxes[sid]["state"] = "Stopped"

    # -- routes -----------------------------------------------------------------------------------

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        self.create_attempts += 1
        if self.create_attempts <= self.rate_limit_creates:
            return JSONResponse({"error": {"code": "TooManyRequests", "message": "Sandbox quota reached"}},
                                status_code=429, headers={"Retry-After": "1"})
        body = await request.json()
        sid = "sbx-" + uuid.uuid4().hex[:12]
        record = {"id": sid, "state": "Creating", "labels": body.get("labels") or {}, "polls": 0,
                  "environment": body.get("environment") or {}, "body": body, "ports": [], "groups": [],
                  "commands": []}
        self.sandboxes[sid] = record
        return JSONResponse(self._dto(record), status_code=201)

    async def list(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        wanted = dict(p.split("=", 1) for p in (request.query_params.get("labels") or "").split(",") if p)
        items = [self._dto(r) for r in self.sandboxes.values()
                 if all(r["labels"].get(k) == v for k, v in wanted.items())]
        return JSONResponse({"value": items, "nextLink": None})

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        sid = request.path_params["sid"]
        record = self.sandboxes.get(sid)
        if record is None:
            return self._not_found(sid)
        record["polls"] += 1
        if record["state"] == "Creating" and record["polls"] >= 2:
            record["state"] = "Running"
        elif record["state"] == "Deleting":
            del self.sandboxes[sid]  # answered "Deleting" once; gone from the next poll on
        return JSONResponse(self._dto(record))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        sid = request.path_params["sid"]
        record = self.sandboxes.get(sid)
        if record is None:
            return self._not_found(sid)
        self._kill(record)
        if record["state"] != "Deleting":
            self.deleted.append(sid)
        record["state"] = "Deleting"
        return Response(status_code=202)

    async def execute(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None:
            return self._not_found(request.path_params["sid"])
        command = (await request.json())["command"]
        record["commands"].append(command)
        env = {**os.environ, **self.extra_env, **record["environment"]}
        # (the group is recorded as soon as it starts: a command still running when the sandbox is
        # deleted or the stand-in stops is killed, not waited for until its timeout)
        code, out, err = await asyncio.to_thread(_run, command, env, record["groups"].append)
        return JSONResponse({"exitCode": code, "stdout": out, "stderr": err})

    async def add_port(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        record = self.sandboxes.get(request.path_params["sid"])
        if record is None:
            return self._not_found(request.path_params["sid"])
        port = int((await request.json())["port"])
        record["ports"].append({"port": port, "url": f"http://127.0.0.1:{port}"})
        return JSONResponse({"ports": record["ports"]})


def _run(command: str, env: dict[str, str], started: Callable[[int], None]) -> tuple[int, str, str]:
    proc = subprocess.Popen(["/bin/sh", "-c", command], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    started(proc.pid)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err
