"""The load-generator process: ``python -m bench.loadgen CONFIG.json`` prints one JSON result.

It runs the phases listed in the config, in order, against one server, and reads the server's
CPU time, memory and threads from ``/proc`` itself at the exact edges of each measurement window
(so no clock has to be shared with the orchestrator). Phases:

* ``setup`` — sessions opened one after another, each timed from TCP connect through the
  WebSocket upgrade to the first ``reset`` reply; the first session also checks that the ``reset``
  reply and two ``step`` replies are byte-identical to the expected ones (when the config has them).
* ``steps`` — N sessions (opened one after another), then each a closed loop with one ``step``
  in flight; warm-up, then a window in which steps, per-step latency and the server's CPU seconds
  are counted.
* ``batch`` — like ``steps``, but each session first negotiates ``step_batch`` (our extension,
  docs/protocol.md §12) and then keeps one ``step_batch`` frame of ``batch`` actions in flight; every action
  counts as a step (latency is per frame).
* ``vector`` — ``sessions`` sessions multiplexed over ``connections`` connections (our ``sessions``
  extension, docs/protocol.md §12): each connection opens its share with ``open``, resets each, then keeps one
  ``step_many`` frame in flight that steps every one of its sessions; every session step counts.
* ``http`` — the same over HTTP/1.1 keep-alive: ``POST /sessions`` + ``POST /reset`` + ``POST /step``
  with the ``OpenEnv-Session-Id`` header (``mode="sessions"``), or upstream's stateless ``POST /step``
  (``mode="stateless"``). Sessions are deleted afterwards.
* ``scale`` — N sessions held for a while, each stepping once per ``interval_s`` after its previous
  reply; counts rejected connections, error frames and sessions dropped by the server.

Every phase is bounded in time and in count. Step replies are checked cheaply (see
``engine.is_observation``); anything else is an error, and the first few are kept as samples.
"""

from __future__ import annotations

import json
import math
import socket
import sys
import time
from typing import Any

from bench import procfs
from bench.clientwire import (
    OP_TEXT,
    WsState,
    build_request,
    connect_ws,
    encode_frame,
    http_roundtrip,
    ws_roundtrip,
)
from bench.engine import HttpConn, Loop, close_ws, is_observation

__all__ = ["main", "percentiles", "run_phases"]

MAX_ERROR_SAMPLES = 5
perf_counter = time.perf_counter


def percentiles(samples: list[float]) -> dict[str, float | int | None]:
    """p50/p90/p99/max/mean of latencies given in seconds, reported in milliseconds."""
    if not samples:
        return {"n": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    s = sorted(samples)
    n = len(s)

    def at(q: float) -> float:
        return round(s[min(n - 1, max(0, math.ceil(q * n) - 1))] * 1000, 4)

    return {"n": n, "p50_ms": at(0.50), "p90_ms": at(0.90), "p99_ms": at(0.99),
            "max_ms": round(s[-1] * 1000, 4), "mean_ms": round(sum(s) / n * 1000, 4)}


def _server_sample(pid: int) -> dict[str, Any]:
    fields = procfs.status_fields(pid)
    return {"rss_mib": procfs.rss_mib(pid, fields), "threads": procfs.threads(pid, fields),
            "fds": procfs.open_fds(pid)}


class _Snapshot:
    __slots__ = ("client_cpu", "count", "counts", "server_cpu", "server_sys", "t")

    def __init__(self, count: int, server_pid: int) -> None:
        self.t = perf_counter()
        self.count = count
        times = procfs.cpu_times(server_pid)
        self.server_cpu = None if times is None else times[0] + times[1]
        self.server_sys = None if times is None else times[1]
        self.client_cpu = time.process_time()
        self.counts = procfs.fault_and_switch_counts(server_pid)


def _window_metrics(a: _Snapshot, b: _Snapshot) -> dict[str, Any]:
    wall = b.t - a.t
    steps = b.count - a.count
    out: dict[str, Any] = {"window_s": round(wall, 4), "steps": steps,
                           "steps_per_s": round(steps / wall, 1) if wall > 0 else None}
    if a.server_cpu is not None and b.server_cpu is not None:
        cpu = b.server_cpu - a.server_cpu
        out["server_cpu_s"] = round(cpu, 3)
        out["server_cpu_util"] = round(cpu / wall, 3) if wall > 0 else None
        out["server_cpu_us_per_step"] = round(cpu / steps * 1e6, 2) if steps else None
        if a.server_sys is not None and b.server_sys is not None and steps:
            # Kernel share (syscalls: send/recv/epoll), to tell the stack's cost from the app's.
            out["server_sys_us_per_step"] = round((b.server_sys - a.server_sys) / steps * 1e6, 2)
    if a.counts is not None and b.counts is not None and steps:
        out["server_minflt_per_step"] = round((b.counts[0] - a.counts[0]) / steps, 4)
        out["server_ctxsw_per_step"] = round((b.counts[1] - a.counts[1]) / steps, 4)
    client = b.client_cpu - a.client_cpu
    out["client_cpu_util"] = round(client / wall, 3) if wall > 0 else None
    out["client_cpu_us_per_step"] = round(client / steps * 1e6, 2) if steps else None
    return out


class _Window:
    """Takes the snapshots when the engine crosses the window's edges."""

    def __init__(self, loop: Loop, pid: int) -> None:
        self.loop, self.pid = loop, pid
        self.snaps: list[_Snapshot] = []
        self.server_at_end: dict[str, Any] = {}

    def __call__(self, edge: str) -> None:
        self.snaps.append(_Snapshot(self.loop.count, self.pid))
        if edge == "end":
            self.server_at_end = _server_sample(self.pid)

    def metrics(self) -> dict[str, Any]:
        return _window_metrics(self.snaps[0], self.snaps[1]) if len(self.snaps) == 2 else {}


def _open_ws(cfg: dict[str, Any], n: int, timeout_s: float,
             batch: bool = False) -> tuple[list[WsState], dict[str, Any]]:
    """Open ``n`` sessions one after another (connect + upgrade + reset), bounded by ``timeout_s``.

    ``batch``: negotiate ``step_batch`` with ``hello`` first; each session's frame is then the
    config's ``batch_frame`` instead of one step."""
    host, port, path = cfg["host"], cfg["port"], cfg.get("ws_path", "/ws")
    reset = cfg["reset_frame"].encode()
    step = (cfg["batch_frame"] if batch else cfg["step_frame"]).encode()
    hello = cfg["hello_batch_frame"].encode() if batch else None
    deadline = perf_counter() + timeout_s
    conns: list[WsState] = []
    times: list[float] = []
    rejected: list[str] = []
    t_all = perf_counter()
    for _ in range(n):
        if perf_counter() > deadline:
            rejected.append("setup deadline passed")
            continue
        t0 = perf_counter()
        try:
            st = connect_ws(host, port, path, offer_deflate=cfg.get("offer_deflate", True), timeout_s=10)
        except OSError as exc:  # ConnectionError and HandshakeError are OSErrors
            rejected.append(f"connect: {type(exc).__name__}: {exc}")
            continue
        try:
            if hello is not None:
                granted = ws_roundtrip(st, encode_frame(hello, OP_TEXT, st.key), 10)
                if b'"step_batch"' not in granted:
                    rejected.append(f"step_batch not granted: {granted[:200]!r}")
                    st.sock.close()
                    continue
            reply = ws_roundtrip(st, encode_frame(reset, OP_TEXT, st.key), 10)
        except OSError as exc:
            rejected.append(f"reset: {type(exc).__name__}: {exc}")
            st.sock.close()
            continue
        if not is_observation(reply):
            rejected.append(f"reset refused: {reply[:200]!r}")
            st.sock.close()
            continue
        times.append(perf_counter() - t0)
        st.frame = encode_frame(step, OP_TEXT, st.key)
        conns.append(st)
    info = {"sessions": n, "opened": len(conns), "rejected": len(rejected),
            "open_all_s": round(perf_counter() - t_all, 4), "setup": percentiles(times),
            "deflate": bool(conns and conns[0].deflate), "ws_extensions": conns[0].extensions if conns else None,
            "error_samples": rejected[:MAX_ERROR_SAMPLES]}
    return conns, info


def phase_steps(cfg: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """Closed-loop steps; ``kind="batch"`` sends ``step_batch`` frames of ``p["batch"]`` actions
    (negotiated first) and counts every action as a step."""
    batch = int(p.get("batch", 1)) if p["kind"] == "batch" else 1
    conns, out = _open_ws(cfg, int(p["sessions"]), float(p.get("setup_timeout_s", 30)), batch=batch > 1)
    out["kind"] = p["kind"]
    out["batch"] = batch
    return _closed_loop(cfg, p, conns, out, batch)


def _closed_loop(cfg: dict[str, Any], p: dict[str, Any], conns: list[WsState], out: dict[str, Any],
                 steps_per_reply: int) -> dict[str, Any]:
    """Run ``conns`` closed-loop (one frame in flight each) through warm-up and the window."""
    if not conns:
        out["errors"] = 0
        return out
    loop = Loop()
    window = _Window(loop, cfg["server_pid"])
    loop.on_edge = window
    loop.run_ws(conns, warmup_s=float(p.get("warmup_s", 1.0)), window_s=float(p.get("window_s", 5.0)),
                max_steps=int(p.get("max_steps", 10_000_000)), steps_per_reply=steps_per_reply)
    out.update(window.metrics())
    out["latency"] = percentiles(loop.latencies)
    out["server"] = window.server_at_end
    out["late_closes"] = close_ws(conns, cfg["close_frame"].encode())
    out["errors"] = loop.errors
    out["error_samples"] = out["error_samples"] + loop.samples
    return out


def _open_vectors(cfg: dict[str, Any], connections: int, per_conn: int,
                  timeout_s: float) -> tuple[list[WsState], dict[str, Any]]:
    """``connections`` connections of ``per_conn`` sessions each (hello, open, reset every session)."""
    host, port, path = cfg["host"], cfg["port"], cfg.get("ws_path", "/ws")
    action = cfg["step_action"]
    deadline = perf_counter() + timeout_s
    conns: list[WsState] = []
    rejected: list[str] = []
    t_all = perf_counter()
    for _ in range(connections):
        if perf_counter() > deadline:
            rejected.append("setup deadline passed")
            continue
        try:
            st = connect_ws(host, port, path, offer_deflate=cfg.get("offer_deflate", True), timeout_s=10)
        except OSError as exc:
            rejected.append(f"connect: {type(exc).__name__}: {exc}")
            continue
        try:
            hello = json.loads(ws_roundtrip(st, encode_frame(b'{"type":"hello","data":{"want":["sessions"]}}',
                                                             OP_TEXT, st.key), 10))
            if "sessions" not in hello.get("data", {}).get("extensions", []):
                raise ConnectionError(f"sessions not granted: {hello!r:.200}")
            sids = [hello["data"]["session_id"]]
            for _ in range(per_conn - 1):
                opened = json.loads(ws_roundtrip(st, encode_frame(b'{"type":"open"}', OP_TEXT, st.key), 10))
                if opened.get("type") != "opened":
                    raise ConnectionError(f"open refused: {opened!r:.200}")
                sids.append(opened["data"]["session_id"])
            for sid in sids:
                reset = b'{"type":"reset","session_id":"' + sid.encode() + b'","data":{}}'
                reply = ws_roundtrip(st, encode_frame(reset, OP_TEXT, st.key), 10)
                if not is_observation(reply):
                    raise ConnectionError(f"reset refused: {reply[:200]!r}")
        except (OSError, ValueError, KeyError) as exc:
            rejected.append(f"{type(exc).__name__}: {exc}")
            st.sock.close()
            continue
        steps = ",".join('{"session_id":"' + sid + '","action":' + action + "}" for sid in sids)
        frame = '{"type":"step_many","data":{"steps":[' + steps + "]}}"
        st.frame = encode_frame(frame.encode(), OP_TEXT, st.key)
        conns.append(st)
    info = {"sessions": connections * per_conn, "connections": connections, "opened": len(conns) * per_conn,
            "rejected": len(rejected), "open_all_s": round(perf_counter() - t_all, 4),
            "deflate": bool(conns and conns[0].deflate), "error_samples": rejected[:MAX_ERROR_SAMPLES]}
    return conns, info


def phase_vector(cfg: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """Closed-loop ``step_many`` frames, one in flight per connection; each session step counts."""
    connections = int(p["connections"])
    per_conn = max(1, int(p["sessions"]) // connections)
    conns, out = _open_vectors(cfg, connections, per_conn, float(p.get("setup_timeout_s", 30)))
    out["kind"] = "vector"
    out["batch"] = per_conn
    return _closed_loop(cfg, p, conns, out, per_conn)


def phase_scale(cfg: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    n = int(p["sessions"])
    pid = cfg["server_pid"]
    conns, out = _open_ws(cfg, n, float(p.get("setup_timeout_s", 120)))
    out["kind"] = "scale"
    out["server_after_open"] = _server_sample(pid)
    peak: dict[str, Any] = dict(out["server_after_open"])

    def tick() -> None:
        for key, value in _server_sample(pid).items():
            if value is not None and (peak.get(key) is None or value > peak[key]):
                peak[key] = value

    loop = Loop()
    window = _Window(loop, pid)
    loop.on_edge = window
    hold = float(p.get("hold_s", 60))
    if conns:
        loop.run_ws(conns, warmup_s=0.0, window_s=hold, max_steps=10**12,
                    paced_s=float(p.get("interval_s", 0.5)), tick=tick)
    alive = sum(1 for st in conns if st.alive)
    out.update(window.metrics())
    out.update({
        "hold_s": hold, "interval_s": float(p.get("interval_s", 0.5)), "alive_at_end": alive,
        "dropped": len(conns) - alive, "min_steps_per_session": min((st.replies for st in conns), default=0),
        "latency": percentiles(loop.latencies), "server_peak": peak,
    })
    out["late_closes"] = close_ws(conns, cfg["close_frame"].encode(), timeout_s=15)
    out["errors"] = loop.errors
    out["error_samples"] = out["error_samples"] + loop.samples
    out["ok"] = bool(out["opened"] == n and not loop.errors and not out["rejected"] and alive == len(conns))
    return out


def phase_setup(cfg: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    host, port, path = cfg["host"], cfg["port"], cfg.get("ws_path", "/ws")
    count = int(p.get("count", 20))
    deadline = perf_counter() + float(p.get("timeout_s", 30))
    expect = cfg.get("expect")
    reset = cfg["reset_frame"].encode()
    step = cfg["step_frame"].encode()
    close = cfg["close_frame"].encode()
    times: list[float] = []
    failures: list[str] = []
    identical: dict[str, bool] | None = None
    for i in range(count):
        if perf_counter() > deadline:
            break
        t0 = perf_counter()
        try:
            st = connect_ws(host, port, path, offer_deflate=cfg.get("offer_deflate", True), timeout_s=10)
        except OSError as exc:
            failures.append(f"connect: {type(exc).__name__}: {exc}")
            continue
        try:
            first = ws_roundtrip(st, encode_frame(reset, OP_TEXT, st.key), 10)
            took = perf_counter() - t0
            if is_observation(first):
                times.append(took)
            else:
                failures.append(f"reset: {first[:200]!r}")
            if i == 0 and expect:
                steps = [ws_roundtrip(st, encode_frame(step, OP_TEXT, st.key), 10) for _ in range(2)]
                identical = {
                    "reset": first.decode() == expect["reset"],
                    "step": all(s.decode() == (expect["step_sep"] + str(k + 1)).join(expect["step_parts"])
                                for k, s in enumerate(steps)),
                }
                if not all(identical.values()):
                    failures.append(f"not byte-identical: reset={first[:120]!r} step1={steps[0][:160]!r}")
        except OSError as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
        close_ws([st], close, timeout_s=2)
    return {"kind": "setup", "count": count, "setup": percentiles(times), "failures": len(failures),
            "failure_samples": failures[:MAX_ERROR_SAMPLES], "byte_identical": identical}


def phase_http(cfg: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    host, port = cfg["host"], cfg["port"]
    mode = p.get("mode", "sessions")
    n = int(p.get("sessions", 8))
    body = json.dumps(cfg["http_step_body"], separators=(",", ":")).encode()
    deadline = perf_counter() + float(p.get("setup_timeout_s", 30))
    conns: list[HttpConn] = []
    rejected: list[str] = []
    for _ in range(n):
        if perf_counter() > deadline:
            rejected.append("setup deadline passed")
            continue
        try:
            sock = socket.create_connection((host, port), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as exc:
            rejected.append(f"connect: {exc}")
            continue
        try:
            sid = None
            buf = b""
            if mode == "sessions":
                create = build_request("POST", "/sessions", host, port, b"{}")
                status, reply, buf = http_roundtrip(sock, buf, create, 10)
                if status != 201:
                    raise ConnectionError(f"POST /sessions: HTTP {status} {reply[:200]!r}")
                sid = json.loads(reply)["session_id"]
                status, reply, buf = http_roundtrip(
                    sock, buf, build_request("POST", "/reset", host, port, b"{}", {"OpenEnv-Session-Id": sid}), 10)
                if status != 200:
                    raise ConnectionError(f"POST /reset: HTTP {status} {reply[:200]!r}")
            headers = {"OpenEnv-Session-Id": sid} if sid else None
            conn = HttpConn(sock, build_request("POST", "/step", host, port, body, headers), sid)
            conn.buf = buf
            conns.append(conn)
        except (OSError, ValueError, KeyError) as exc:
            rejected.append(f"{type(exc).__name__}: {exc}")
            sock.close()
    out: dict[str, Any] = {"kind": "http", "mode": mode, "sessions": n, "opened": len(conns),
                           "rejected": len(rejected)}
    loop = Loop()
    if conns:
        window = _Window(loop, cfg["server_pid"])
        loop.on_edge = window
        loop.run_http(conns, warmup_s=float(p.get("warmup_s", 1.0)), window_s=float(p.get("window_s", 5.0)),
                      max_steps=int(p.get("max_steps", 10_000_000)))
        out.update(window.metrics())
        out["latency"] = percentiles(loop.latencies)
    for conn in conns:  # delete our sessions so they do not linger until the idle timeout
        try:
            if conn.sid and conn.alive:
                conn.sock.setblocking(True)
                status, reply, _ = http_roundtrip(conn.sock, conn.buf, build_request(
                    "DELETE", f"/sessions/{conn.sid}", host, port), 5)
                if status != 200:
                    loop.error(f"DELETE /sessions: HTTP {status} {reply[:200]!r}")
        except OSError as exc:
            loop.error(f"DELETE /sessions: {exc}")
        finally:
            conn.sock.close()
    out.update(errors=loop.errors, error_samples=(rejected + loop.samples)[:MAX_ERROR_SAMPLES])
    return out


PHASES = {"setup": phase_setup, "steps": phase_steps, "batch": phase_steps, "vector": phase_vector,
          "http": phase_http, "scale": phase_scale}


def run_phases(cfg: dict[str, Any]) -> dict[str, Any]:
    results = []
    for p in cfg["phases"]:
        t0 = perf_counter()
        try:
            result = PHASES[p["kind"]](cfg, p)
        except Exception as exc:  # a broken phase is reported, the others still run
            result = {"kind": p["kind"], "failed": f"{type(exc).__name__}: {exc}"}
        result["name"] = p.get("name", p["kind"])
        result["elapsed_s"] = round(perf_counter() - t0, 3)
        results.append(result)
        time.sleep(float(p.get("settle_s", 0.2)))  # let the server finish closing sessions
    return {"phases": results}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as f:
        cfg = json.load(f)
    procfs.pin(cfg.get("cpus"))
    procfs.raise_nofile(int(cfg.get("nofile", 4096)))
    result = run_phases(cfg)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
