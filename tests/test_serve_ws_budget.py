"""``openenv serve`` counts WebSocket messages against the body budget from their first byte
(``openenv.wsguard``; issue 21, item 1): large senders are paused, never dropped, while small
frames keep flowing, and a stalled sender cannot hold the others up."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time

import pytest
from websockets.sync.client import connect

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

MIB = 1024 * 1024


def big_step(port: int, size: int, results: list[object]) -> None:
    try:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=20, proxy=None, max_size=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=60)
            ws.send(json.dumps({"type": "step", "data": {"message": "x" * size}}))
            reply = ws.recv(timeout=120)
            results.append(json.loads(reply)["type"])
    except Exception as exc:  # reported by the test
        results.append(repr(exc))


def test_many_large_frames_are_all_answered_within_a_bounded_memory(serve_proc, proc_memory) -> None:  # type: ignore[no-untyped-def]
    proc, port, log_path = serve_proc("--transport", "ws", "--max-body-budget-mb", "16", "--max-message-mb", "32")
    before = proc_memory(proc.pid, "VmHWM")
    results: list[object] = []
    threads = [threading.Thread(target=big_step, args=(port, 20 * 1000 * 1000, results)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    grown = proc_memory(proc.pid, "VmHWM") - before
    assert results == ["observation"] * 8, results  # paused, never dropped
    # Unbounded, eight 20 MB echoes at once peak near 8 x 200 MB here; held to the budget, about
    # two are in the server at once.
    assert grown < 700 * MIB, f"peak RSS grew by {grown / MIB:.0f} MiB"
    assert "paused reading a WebSocket connection" in log_path.read_text()


def raw_ws(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def test_a_stalled_large_sender_holds_up_neither_small_frames_nor_other_large_ones(serve_proc) -> None:  # type: ignore[no-untyped-def]
    _, port, log_path = serve_proc("--transport", "ws", "--max-body-budget-mb", "2", "--max-message-mb", "16")
    # A client announces an 8 MiB frame, sends 3 MiB of it (past the whole budget) and stalls.
    stalled = raw_ws(port)
    try:
        mask = b"\x00\x00\x00\x00"
        stalled.sendall(b"\x81\xff" + (8 * MIB).to_bytes(8, "big") + mask + b"x" * (3 * MIB))
        time.sleep(0.5)
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=10, proxy=None) as small:
            small.send('{"type":"reset","data":{}}')
            small.recv(timeout=10)
            started = time.monotonic()
            for _ in range(20):  # ordinary frames are never paused
                small.send('{"type":"step","data":{"message":"hi"}}')
                assert json.loads(small.recv(timeout=5))["type"] == "observation"
            assert time.monotonic() - started < 5
            # Another large sender is paused behind the stalled one, then gets its turn.
            results: list[object] = []
            big_step(port, 1 * MIB, results)
            assert results == ["observation"], results
    finally:
        stalled.close()
    assert "paused reading a WebSocket connection" in log_path.read_text()
