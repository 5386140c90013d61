"""The servers under test: how each is started, found ready, measured idle, and stopped.

Every server is its own process (own process group, pinned to the server CPU when there are two
or more), bound to 127.0.0.1 on a port the OS picks, and reports readiness by writing a JSON
ready file ``{"host", "port", "pid"}`` once it accepts connections. Start-to-ready is the time
from just before ``Popen`` to the ready file appearing (polled every 2 ms). Servers are stopped
by PID (SIGTERM, then SIGKILL after a bounded wait), never by name.

Targets (keys are used in the JSON and the tables):

* ``ours-sync``    — ``python -m openenv serve echo`` (the sync env, run inline on the loop)
* ``ours-async``   — ``python -m openenv serve echo_async`` (``reset_async``/``step_async``)
* ``upstream``     — upstream ``openenv==0.10.0`` with the same echo env in its API, own venv
* ``bare-default`` — the bare ASGI echo on uvicorn's default (pure-Python) stack
* ``bare-shipped`` — the bare ASGI echo on exactly the stack ``openenv.server.serve`` uses
* ``floor-shipped`` — the same bare app doing only the env's own work per step (parse, validate the
  action, ``EchoEnv.step``, encode): the floor for any server of this env on this stack
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procfs

__all__ = ["ALL_TARGETS", "ROOT", "Running", "Target", "capture_templates", "make_targets", "our_env", "upstream_env"]

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
ALL_TARGETS = ("ours-sync", "ours-async", "upstream", "bare-default", "bare-shipped", "floor-shipped")

STEP_ACTION = '{"message":"hello"}'
STEP_FRAME = '{"type":"step","data":' + STEP_ACTION + "}"
RESET_FRAME = '{"type":"reset","data":{}}'
CLOSE_FRAME = '{"type":"close"}'
HTTP_STEP_BODY = {"action": {"message": "hello"}}
#: The header that binds an HTTP request to a session (docs/protocol.md §5).
SESSION_HEADER = "OpenEnv-Session-Id"
STEP_SEP = '"step":'
#: The batched-steps extension (docs/protocol.md §12): negotiated with ``hello``, then one frame carries many steps.
HELLO_BATCH_FRAME = '{"type":"hello","data":{"want":["step_batch"]}}'


def batch_frame(size: int) -> str:
    """A ``step_batch`` frame of ``size`` copies of the benchmark's step action."""
    return '{"type":"step_batch","data":{"actions":[' + ",".join(['{"message":"hello"}'] * size) + "]}}"



@dataclass
class Target:
    """How to start one server."""

    key: str
    label: str
    argv: list[str]
    env: dict[str, str]
    #: "sessions" (POST /sessions + header) or "stateless" (upstream's one-shot /step).
    http_mode: str = "sessions"
    #: Whether its replies must be byte-identical to our server's (checked in the setup phase).
    identical: bool = True
    #: Whether it speaks our negotiated ``step_batch`` extension (measured in the ``batch`` phase).
    batch: bool = False
    ready_timeout_s: float = 30.0
    notes: list[str] = field(default_factory=list)


@dataclass
class Running:
    """A started server."""

    target: Target
    proc: subprocess.Popen[bytes]
    pid: int
    port: int
    ready_s: float
    log_path: Path
    stack: dict[str, Any]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def idle_sample(self) -> dict[str, Any]:
        fields = procfs.status_fields(self.pid)
        return {"rss_mib": procfs.rss_mib(self.pid, fields), "threads": procfs.threads(self.pid, fields),
                "cpu_s": procfs.cpu_seconds(self.pid)}

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        _stop(self.proc, timeout_s)


def _stop(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    except ProcessLookupError:
        pass


def upstream_env() -> dict[str, str]:
    """Environment for upstream's interpreter: nothing of ours on its import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENENV_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def our_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    # A crashed benchmark must not leave servers behind (the kernel's serve honours it).
    env["OPENENV_DIE_WITH_PARENT"] = "1"
    return env


def make_targets(keys: list[str], *, templates: Path, max_sessions: int,
                 upstream_python: Path | None) -> tuple[list[Target], dict[str, str]]:
    """The targets to run, and the ones skipped with the reason."""
    py = sys.executable
    skipped: dict[str, str] = {}
    targets: list[Target] = []
    for key in keys:
        if key in ("ours-sync", "ours-async"):
            env_name = "echo" if key == "ours-sync" else "echo_async"
            targets.append(Target(
                key, f"ours ({'sync' if key == 'ours-sync' else 'async'} echo)",
                [py, "-m", "openenv", "serve", env_name, "--host", HOST, "--port", "0",
                 "--max-sessions", str(max_sessions), "--log-level", "warning", "--ready-file", "{ready}"],
                our_env(), batch=True,
            ))
        elif key == "upstream":
            if upstream_python is None or not upstream_python.exists():
                skipped[key] = (f"no upstream venv at {upstream_python}: create it with `uv venv --python 3.11 "
                                "DIR && uv pip install --python DIR/bin/python openenv==0.10.0`")
                continue
            targets.append(Target(
                key, "upstream 0.10",
                [str(upstream_python), str(ROOT / "bench" / "upstream_echo.py"), "--max-sessions",
                 str(max_sessions), "--ready-file", "{ready}", "--stack-file", "{stack}"],
                upstream_env(), http_mode="stateless", identical=False, ready_timeout_s=120.0,
                notes=["HTTP: upstream's stateless POST /step (a new env per request)"],
            ))
        elif key in ("bare-default", "bare-shipped"):
            stack = key.split("-")[1]
            targets.append(Target(
                key, f"bare echo ({stack} stack)",
                [py, "-m", "bench.bare_echo", "--stack", stack, "--templates", str(templates),
                 "--ready-file", "{ready}", "--stack-file", "{stack}"],
                our_env(),
            ))
        elif key == "floor-shipped":
            targets.append(Target(
                key, "floor: bare + env work (shipped stack)",
                [py, "-m", "bench.bare_echo", "--stack", "shipped", "--work", "env", "--templates", str(templates),
                 "--ready-file", "{ready}", "--stack-file", "{stack}"],
                our_env(), notes=["HTTP: canned replies, as bare-shipped (the floor covers /ws only)"],
            ))
        elif key.startswith("bare:"):
            parts = key.split(":")[1:]
            if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("on", "off")):
                raise ValueError(f"custom bare target {key!r}: use bare:LOOP:HTTP:WS[:on|off], e.g. "
                                 "bare:uvloop:httptools:websockets-sansio")
            loop, http, ws = parts[:3]
            deflate = parts[3] if len(parts) == 4 else "off"
            targets.append(Target(
                key, f"bare echo ({loop}/{http}/{ws}, deflate {deflate})",
                [py, "-m", "bench.bare_echo", "--stack", "custom", "--loop", loop, "--http", http, "--ws", ws,
                 "--deflate", deflate, "--templates", str(templates), "--ready-file", "{ready}",
                 "--stack-file", "{stack}"],
                our_env(),
            ))
        else:
            raise ValueError(f"unknown target {key!r}; choose from {', '.join(ALL_TARGETS)} or "
                             "bare:LOOP:HTTP:WS[:on|off]")
    return targets, skipped


def start(target: Target, workdir: Path, cpus: list[int] | None) -> Running:
    """Start ``target`` and wait (bounded) for its ready file."""
    workdir.mkdir(parents=True, exist_ok=True)
    stamp = f"{target.key}-{time.monotonic_ns()}"
    ready = workdir / f"{stamp}.ready.json"
    stack = workdir / f"{stamp}.stack.json"
    log_path = workdir / f"{stamp}.log"
    argv = [a.replace("{ready}", str(ready)).replace("{stack}", str(stack)) for a in target.argv]

    def child_setup() -> None:
        procfs.pin(cpus)
        procfs.die_with_parent()

    with open(log_path, "wb") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=str(ROOT), env=target.env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=child_setup)
    deadline = t0 + target.ready_timeout_s
    while True:
        if ready.exists():
            ready_s = time.perf_counter() - t0
            break
        if proc.poll() is not None or time.perf_counter() > deadline:
            _stop(proc, 5)
            tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
            why = f"exited with {proc.returncode}" if proc.returncode is not None else "not ready in time"
            raise RuntimeError(f"{target.label} {why}:\n{tail}")
        time.sleep(0.002)
    info = json.loads(ready.read_text())
    stack_info: dict[str, Any] = {}
    for _ in range(250):  # the stack file is written during start-up; give it a moment (bounded)
        if stack.exists():
            stack_info = json.loads(stack.read_text())
            break
        if target.key.startswith("ours"):
            break  # our server does not write one; its stack is the bare-shipped one
        time.sleep(0.002)
    return Running(target, proc, int(info.get("pid") or proc.pid), int(info["port"]), ready_s, log_path, stack_info)


def capture_templates(workdir: Path, max_sessions: int) -> dict[str, Any]:
    """Start our server (sync echo), record its exact replies, and cut out the step counter.

    The bare echo answers with these bytes, so its replies are byte-identical to ours.
    """
    import http.client

    from websockets.sync.client import connect

    target = make_targets(["ours-sync"], templates=workdir / "unused", max_sessions=max_sessions,
                          upstream_python=None)[0][0]
    running = start(target, workdir, None)
    try:
        with connect(f"ws://{HOST}:{running.port}/ws", compression=None, open_timeout=10) as ws:
            ws.send(RESET_FRAME)
            ws_reset = ws.recv(10)
            ws.send(STEP_FRAME)
            ws_1 = ws.recv(10)
            ws.send(STEP_FRAME)
            ws_2 = ws.recv(10)
            ws.send(CLOSE_FRAME)
        conn = http.client.HTTPConnection(HOST, running.port, timeout=10)

        def post(path: str, body: Any, sid: str | None) -> tuple[int, str]:
            headers = {"Content-Type": "application/json"}
            if sid:
                headers[SESSION_HEADER] = sid
            conn.request("POST", path, json.dumps(body), headers)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()

        _, created = post("/sessions", {}, None)
        sid = json.loads(created)["session_id"]
        _, http_reset = post("/reset", {}, sid)
        _, http_1 = post("/step", HTTP_STEP_BODY, sid)
        _, http_2 = post("/step", HTTP_STEP_BODY, sid)
        conn.request("DELETE", f"/sessions/{sid}")
        conn.getresponse().read()
        conn.close()
    finally:
        running.stop()
    return {
        "ws": {"reset": _text(ws_reset), **_split(_text(ws_1), _text(ws_2))},
        "http": {"reset": http_reset, **_split(http_1, http_2)},
    }


def _text(frame: str | bytes) -> str:
    return frame.decode() if isinstance(frame, bytes) else frame


def _split(first: str, second: str) -> dict[str, Any]:
    """Template parts such that ``'"step":N'.join(parts)`` is the reply to step N."""
    parts = first.split(STEP_SEP + "1")
    if len(parts) > 1 and (STEP_SEP + "2").join(parts) == second:
        return {"step_parts": parts, "step_sep": STEP_SEP, "counter": True}
    # No counter found: answer every step with the first reply (still a faithful size and shape).
    return {"step_parts": [first], "step_sep": STEP_SEP, "counter": False}
