"""Snapshots over HTTP (``POST /sessions/{id}/snapshot`` and ``/restore``), raw and through the
kernel client with ``transport="rest"``; refusals keep their ``SNAPSHOT_ERROR`` code and reason."""

from __future__ import annotations

from typing import Any

import pytest
from rest_support import EchoEnv, Serve

from openenv import EnvClient
from openenv.errors import SnapshotError
from openenv.testing import WalkAction, WalkEnv, WalkObservation

SID = "OpenEnv-Session-Id"


async def _session(c: Any) -> str:
    r = await c.post("/sessions")
    assert r.status_code == 201
    return str(r.json()["session_id"])


async def test_snapshot_and_restore_routes(serve: Serve) -> None:
    srv = await serve(env=WalkEnv, max_sessions=4)
    async with srv.client() as c:
        a, b = await _session(c), await _session(c)
        await c.post("/reset", json={"seed": 5}, headers={SID: a})
        await c.post("/step", json={"action": {"delta": 2}}, headers={SID: a})
        r = await c.post(f"/sessions/{a}/snapshot")
        assert r.status_code == 200 and r.headers[SID] == a
        snap = r.json()
        r = await c.post(f"/sessions/{b}/restore", json=snap)
        assert r.status_code == 200 and r.json()["observation"]["position"] == snap["state"]["position"]
        steps = [await c.post("/step", json={"action": {"delta": 1}}, headers={SID: s}) for s in (a, b)]
        assert steps[0].json() == steps[1].json()
        bad = {**snap, "state": {**snap["state"], "position": 99}}
        r = await c.post(f"/sessions/{b}/restore", json=bad)
        assert r.status_code == 422 and r.json()["code"] == "SNAPSHOT_ERROR" and r.json()["reason"] == "tampered"
        assert (await c.post("/sessions/nope/snapshot")).status_code == 404
        assert (await c.post(f"/sessions/{b}/restore")).status_code == 422  # a body is required


async def test_an_env_without_snapshots_answers_501(serve: Serve) -> None:
    srv = await serve(env=EchoEnv)
    async with srv.client() as c:
        sid = await _session(c)
        await c.post("/reset", json={}, headers={SID: sid})
        r = await c.post(f"/sessions/{sid}/snapshot")
        assert r.status_code == 501 and r.json()["reason"] == "unsupported"


async def test_the_client_forks_over_http(serve: Serve) -> None:
    srv = await serve(env=WalkEnv, max_sessions=4)
    async with EnvClient(srv.url, transport="rest", action_type=WalkAction,
                         observation_type=WalkObservation) as env:
        await env.reset(seed=9)
        await env.step(WalkAction(delta=1))
        branch, _at = await env.fork()
        assert (await branch.state()).step_count == 1
        a, b = await env.step(WalkAction(delta=-1)), await branch.step(WalkAction(delta=-1))
        assert a.observation == b.observation
        with pytest.raises(SnapshotError) as info:
            await branch.restore({"format": "x"})
        assert info.value.reason == "malformed"
