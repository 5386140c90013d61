"""``openenv serve echo --workers 2``: real front and worker processes on 127.0.0.1.

Sessions over /ws and over HTTP land on both workers (read from the front's merged
/capabilities and /metrics) and stay on theirs; ``--max-sessions`` is the total; the token is
enforced on every route; a worker killed with SIGKILL loses only its sessions (with a clear error)
and is replaced; SIGTERM to the front leaves no process behind (counted by PID).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.client import GenericEnvClient
from openenv.errors import CapacityError, SessionLostError
from openenv.testing import wait_until

pytestmark = [pytest.mark.slow,
              pytest.mark.requires_plugins("serve-uvicorn", "transport-ws", "transport-rest", "metrics", "env-echo")]

Start = Callable[..., tuple[subprocess.Popen[str], str, dict[str, Any]]]


@pytest.fixture
def front(tmp_path: Path, cli_env: dict[str, str]) -> Iterator[Start]:
    """``start(*args, env=...)`` runs ``openenv serve echo --workers 2 --port 0 ARGS``; returns
    (process, base URL, ready-file record). Every process it started is killed at the end."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None, new_session: bool = False
              ) -> tuple[subprocess.Popen[str], str, dict[str, Any]]:
        ready = tmp_path / f"ready{len(procs)}.json"
        log = open(tmp_path / f"front{len(procs)}.log", "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", "echo", "--workers", "2", "--port", "0",
             "--ready-file", str(ready), *args],
            stdout=log, stderr=subprocess.STDOUT, text=True, env={**cli_env, **(env or {})},
            start_new_session=new_session)
        procs.append(proc)
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=60)
        if not info:
            pytest.fail(f"front did not get ready: {(tmp_path / f'front{len(procs) - 1}.log').read_text()}")
        return proc, f"http://127.0.0.1:{info['port']}", info

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _per_worker(url: str, **headers: str) -> list[dict[str, Any]]:
    """The front's per-worker facts (sync: wait_until polls it)."""
    caps = httpx.get(f"{url}/capabilities", headers=headers, timeout=10).json()
    return caps["workers"]["per_worker"]  # type: ignore[no-any-return]


async def _request(method: str, url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.request(method, url)


def _metric(text: str, name: str, worker: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'worker="{worker}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} for worker {worker} in:\n{text}")


async def test_ws_and_http_sessions_use_both_workers_and_stay_on_theirs(front: Start) -> None:
    _, url, info = front("--max-sessions", "8")
    assert len(info["workers"]) == 2
    ws = [GenericEnvClient(url, transport="ws") for _ in range(2)]
    for i, c in enumerate(ws):
        await c.reset()
        assert (await c.step({"message": f"ws{i}"})).observation["echoed_message"] == f"ws{i}"
    per = _per_worker(url)
    assert [w["websockets"] for w in per] == [1, 1]  # one WebSocket on each worker
    http = [GenericEnvClient(url, transport="rest") for _ in range(2)]
    for round_ in range(4):  # each step continues its session's episode: it reached the right worker
        for i, c in enumerate(http):
            if round_ == 0:
                await c.reset()
            result = await c.step({"message": f"http{i}-{round_}"})
            assert result.observation["echoed_message"] == f"http{i}-{round_}"
    per = _per_worker(url)
    assert [w["http_sessions"] for w in per] == [1, 1]
    metrics = (await _request("GET", f"{url}/metrics")).text
    opened = [_metric(metrics, "openenv_sessions_open", w) for w in ("0", "1")]
    assert opened == [2.0, 2.0] and _metric(metrics, "openenv_sessions_open", "total") == 4.0
    caps = (await _request("GET", f"{url}/capabilities")).json()
    assert caps["max_sessions"] == 8 and [w["max_sessions"] for w in caps["workers"]["per_worker"]] == [4, 4]
    for c in ws + http:
        await c.close()


async def test_one_keep_alive_connection_reaches_each_sessions_worker(front: Start) -> None:
    """Requests of one client connection are routed one by one, each to its session's worker."""
    _, url, _ = front("--max-sessions", "8")
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        ids = [(await http.post("/sessions")).json()["session_id"] for _ in range(4)]
        for sid in ids:
            assert (await http.post("/reset", json={}, headers={"OpenEnv-Session-Id": sid})).status_code == 200
        for round_ in range(3):
            for sid in ids:
                r = await http.post("/step", json={"action": {"message": f"{sid}-{round_}"}},
                                    headers={"OpenEnv-Session-Id": sid})
                assert r.status_code == 200 and r.json()["observation"]["echoed_message"] == f"{sid}-{round_}"
                assert r.headers["openenv-session-id"] == sid
        assert [w["http_sessions"] for w in _per_worker(url)] == [2, 2]
        for sid in ids:  # DELETE reaches the right worker too, and the front forgets the session
            assert (await http.delete(f"/sessions/{sid}")).json()["closed"] is True
        assert [w["http_sessions"] for w in _per_worker(url)] == [0, 0]
        gone = await http.post("/step", json={"action": {"message": "x"}}, headers={"OpenEnv-Session-Id": ids[0]})
        assert gone.status_code == 404


@pytest.mark.requires_plugins("transport-mcp")
async def test_mcp_sessions_over_http_stay_on_their_worker(front: Start) -> None:
    _, url, _ = front()
    headers = {"accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx.AsyncClient(base_url=url, timeout=10, headers=headers) as http:
        sids = []
        for _ in range(4):
            r = await http.post("/mcp", json=init)
            assert r.status_code == 200
            sids.append(r.headers["mcp-session-id"])
        for sid in sids * 2:  # a session unknown to the worker asked would be refused
            h = {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=h)
            assert r.status_code == 200 and "result" in r.text, r.text
        h = {"mcp-session-id": "f" * 32, "mcp-protocol-version": "2025-06-18"}  # what a wrong worker says
        r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=h)
        assert r.status_code == 404
    assert [w["http_sessions"] for w in _per_worker(url)] == [2, 2]


async def test_max_sessions_is_the_total_across_workers(front: Start) -> None:
    _, url, _ = front("--max-sessions", "2")
    held = [GenericEnvClient(url, transport="ws") for _ in range(2)]
    for c in held:
        await c.reset()
    extra = GenericEnvClient(url, transport="ws")
    with pytest.raises(CapacityError):
        await extra.reset()
    await extra.close()
    refused = (await _request("POST", f"{url}/sessions"))  # the same 503 shape as one process
    assert refused.status_code == 503 and refused.json()["code"] == "CAPACITY_REACHED"
    await held[0].close()
    again = GenericEnvClient(url, transport="ws")  # a freed slot is usable at once
    assert wait_until(lambda: sum(w["websockets"] for w in _per_worker(url)) == 1, timeout_s=10, interval_s=0.1)
    await again.reset()
    for c in (held[1], again):
        await c.close()


async def test_a_full_worker_passes_a_new_session_to_one_with_room(front: Start) -> None:
    """The front's count can be off (an HTTP session closed by a worker's idle reaper is still
    counted); a new session refused by a full worker then goes to the one with room."""
    _, url, _ = front("--max-sessions", "2", "--idle-timeout", "0.5")
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:
        assert (await http.post("/sessions")).status_code == 201  # reaped soon, still counted by the front

        for _ in range(150):  # until the reaper closed it (bounded: 15 s)
            if _metric((await http.get("/metrics")).text, "openenv_sessions_open", "total") == 0.0:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the idle session was not reaped")
        held = GenericEnvClient(url, transport="ws")
        await held.reset()  # the worker the front thinks is empty
        for _ in range(2):
            # both look full to the front now; one is not: the session must be opened whichever is tried first
            created = await http.post("/sessions")
            assert created.status_code == 201, created.text
            assert (await http.delete(f"/sessions/{created.json()['session_id']}")).status_code == 200
        second = await http.post("/sessions")
        full = await http.post("/sessions")  # the total (2) is reached: refused with the one-process shape
        assert second.status_code == 201 and full.status_code == 503 and full.json()["code"] == "CAPACITY_REACHED"
        await held.close()


async def test_the_token_is_enforced_on_every_route(front: Start) -> None:
    _, url, _ = front(env={"OPENENV_TOKEN": "s3cret"})
    for path in ("/capabilities", "/metrics", "/schema", "/state"):
        assert (await _request("GET", f"{url}{path}")).status_code == 401, path
    assert (await _request("POST", f"{url}/sessions")).status_code == 401
    assert (await _request("POST", f"{url}/reset")).status_code == 401
    with pytest.raises(ConnectionError):
        await GenericEnvClient(url, transport="ws", token="wrong").reset()
    auth = {"Authorization": "Bearer s3cret"}
    assert len(_per_worker(url, **auth)) == 2
    async with GenericEnvClient(url, transport="ws", token="s3cret") as c:
        await c.reset()
    async with GenericEnvClient(url, transport="rest", token="s3cret") as c:
        await c.reset()
        await c.step({"message": "hi"})


async def test_a_killed_worker_loses_only_its_sessions_and_is_replaced(front: Start) -> None:
    _, url, _ = front("--max-sessions", "8")
    ws = [GenericEnvClient(url, transport="ws") for _ in range(2)]
    for c in ws:
        await c.reset()
    http = [GenericEnvClient(url, transport="rest") for _ in range(2)]
    for c in http:
        await c.reset()
    victim = _per_worker(url)[0]["pid"]
    os.kill(victim, signal.SIGKILL)
    outcomes: list[str] = []
    for c in ws + http:
        try:
            await c.step({"message": "after"})
            outcomes.append("ok")
        except SessionLostError as exc:  # the normal session-lost error, over /ws and over HTTP
            outcomes.append(str(exc))
    lost = [o for o in outcomes if o != "ok"]
    assert outcomes.count("ok") == 2 and len(lost) == 2, outcomes  # one ws and one HTTP session each
    # The error says why: over HTTP always; over /ws when the front's error frame arrives before the
    # client notices the socket closing (under load it can lose that race: then SESSION_LOST alone).
    assert "worker 0 exited" in lost[-1], lost
    assert "worker 0 exited" in lost[0] or "SESSION_LOST" in lost[0], lost
    replaced = wait_until(lambda: (lambda p: p[0]["pid"] != victim and p[0]["restarts"] == 1 and p)(
        _per_worker(url)), timeout_s=30, interval_s=0.1)
    assert replaced, "worker 0 was not restarted"
    fresh = [GenericEnvClient(url, transport="ws") for _ in range(3)]
    for c in fresh:
        await c.reset()
        await c.step({"message": "new"})
    assert all(w["websockets"] >= 1 for w in _per_worker(url))  # the replacement takes sessions
    for c in ws + http + fresh:
        try:
            await c.close()
        except Exception:  # the lost ones may report their loss again on close
            pass


def test_sigterm_to_the_front_leaves_no_process(front: Start) -> None:
    proc, url, info = front()
    pids = [info["pid"], *info["workers"]]
    assert httpx.get(f"{url}/health", timeout=10).status_code == 200
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 128 + signal.SIGTERM
    gone = wait_until(lambda: not any(_alive(p) for p in pids), timeout_s=10, interval_s=0.1)
    assert gone, [p for p in pids if _alive(p)]


def test_ctrl_c_to_the_process_group_stops_everything_without_restarts(front: Start, tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the front and its workers at once: no worker's exit is taken
    for a crash to restart."""
    proc, _, info = front(new_session=True)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(30) == 130
    assert wait_until(lambda: not any(_alive(p) for p in info["workers"]), timeout_s=10, interval_s=0.1)
    assert "restarting it" not in (tmp_path / "front0.log").read_text()


def test_workers_die_with_a_killed_front(front: Start) -> None:
    proc, _, info = front()
    proc.kill()  # no chance to stop them: die-with-parent does
    proc.wait(10)
    assert wait_until(lambda: not any(_alive(p) for p in info["workers"]), timeout_s=15)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
