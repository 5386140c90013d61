"""Unit tests of the benchmark's own parts: the client wire code, templates, statistics, ratios.

The benchmark as a whole is exercised by ``nox -s bench -- --quick`` (real servers, real sockets);
these pin down the pieces whose bugs would silently skew numbers rather than crash.
"""

from __future__ import annotations

import socket
import zlib

import pytest

from bench import clientwire, report
from bench.engine import is_observation
from bench.loadgen import percentiles
from bench.targets import _split


def _server_frame(payload: bytes, opcode: int = 0x1, fin: bool = True, rsv1: bool = False) -> bytes:
    """An unmasked frame as a server sends it."""
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = bytes((b0, n))
    elif n < 65536:
        head = bytes((b0, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((b0, 127)) + n.to_bytes(8, "big")
    return head + payload


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536])
def test_client_frames_are_masked_and_parse_back(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    frame = clientwire.encode_frame(payload, clientwire.OP_TEXT, b"\x01\x02\x03\x04")
    assert frame[1] & 0x80, "client frames must be masked"
    if size >= 4:
        assert payload not in frame  # masked on the wire
    parsed = clientwire.parse_frame(frame + b"extra", 0)
    assert parsed is not None
    end, b0, got = parsed
    assert (got, b0 & 0x0F, end) == (payload, clientwire.OP_TEXT, len(frame))


def test_parse_frame_waits_for_a_complete_frame() -> None:
    frame = _server_frame(b"x" * 300)
    for cut in (1, 3, 100, len(frame) - 1):
        assert clientwire.parse_frame(frame[:cut], 0) is None
    assert clientwire.parse_frame(frame, 0) is not None


def _state() -> tuple[clientwire.WsState, socket.socket]:
    a, b = socket.socketpair()
    return clientwire.WsState(a, b"\x00\x00\x00\x00", "permessage-deflate; server_max_window_bits=12"), b


def test_compressed_and_fragmented_messages_are_reassembled_and_inflated() -> None:
    st, peer = _state()
    try:
        text = b'{"type":"observation","data":{"x":"' + b"y" * 500 + b'"}}'
        comp = zlib.compressobj(wbits=-12)
        body = comp.compress(text) + comp.flush(zlib.Z_SYNC_FLUSH)
        assert body.endswith(b"\x00\x00\xff\xff")
        body = body[:-4]
        first, second = body[:10], body[10:]
        assert clientwire.ws_message(st, 0x40 | 0x1, first) is None  # not final, compressed
        assert clientwire.ws_message(st, 0x80 | 0x0, second) == text  # final continuation
        # Context takeover: a second message compressed with the same stream still inflates.
        body2 = comp.compress(text) + comp.flush(zlib.Z_SYNC_FLUSH)
        assert clientwire.ws_message(st, 0x80 | 0x40 | 0x1, body2[:-4]) == text
    finally:
        st.sock.close()
        peer.close()


def test_pings_are_answered_with_pongs_and_close_is_echoed() -> None:
    st, peer = _state()
    try:
        assert clientwire.ws_message(st, 0x80 | clientwire.OP_PING, b"abc") is None
        pong = clientwire.parse_frame(peer.recv(100), 0)
        assert pong is not None and pong[1] & 0x0F == clientwire.OP_PONG and pong[2] == b"abc"
        assert clientwire.ws_message(st, 0x80 | clientwire.OP_CLOSE, b"\x03\xe8") is None
        assert st.closed
        close = clientwire.parse_frame(peer.recv(100), 0)
        assert close is not None and close[1] & 0x0F == clientwire.OP_CLOSE
    finally:
        st.sock.close()
        peer.close()


def test_http_responses_need_content_length() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX: y\r\n\r\n{}HTTP/1.1 201"
    parsed = clientwire.parse_response(ok)
    assert parsed is not None
    end, status, _head, body = parsed
    assert (status, body, ok[end:]) == (200, b"{}", b"HTTP/1.1 201")
    assert clientwire.parse_response(ok[:20]) is None
    assert clientwire.parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}") is None
    with pytest.raises(ConnectionError, match="Content-Length"):
        clientwire.parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")


def test_step_templates_refill_the_counter_or_fall_back() -> None:
    one = '{"observation":{"metadata":{"step":1}},"metadata":{"step":1}}'
    two = one.replace('"step":1', '"step":2')
    t = _split(one, two)
    assert t["counter"] is True
    assert (t["step_sep"] + "7").join(t["step_parts"]) == one.replace('"step":1', '"step":7')
    fallback = _split('{"a":1}', '{"a":2}')
    assert fallback["counter"] is False and fallback["step_parts"] == ['{"a":1}']


def test_observation_check_is_cheap_first_and_exact_after() -> None:
    assert is_observation(b'{"type":"observation","data":{}}')
    assert is_observation(b'{"data":{},"type":"observation"}')
    assert not is_observation(b'{"type":"error","data":{"message":"x","code":"EXECUTION_ERROR"}}')
    assert not is_observation(b"not json")


def test_percentiles_use_nearest_rank() -> None:
    samples = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    p = percentiles(samples)
    assert (p["n"], p["p50_ms"], p["p99_ms"], p["max_ms"]) == (100, 50.0, 99.0, 100.0)
    assert percentiles([])["p50_ms"] is None


def _round(sps: dict[str, float], cpu: dict[str, float]) -> dict[str, dict]:
    out = {}
    for key in sps:
        out[key] = {"ready_s": 0.5, "idle": {"rss_mib": 40.0, "threads": 1}, "phases": [
            {"name": "steps-64", "kind": "steps", "sessions": 64, "steps_per_s": sps[key],
             "server_cpu_us_per_step": cpu[key], "server": {"rss_mib": 41.0, "threads": 1}, "errors": 0},
        ]}
    return out


def test_summary_takes_medians_and_ratios_to_the_references() -> None:
    sps = {"ours-sync": 10_000.0, "bare-shipped": 20_000.0, "bare-default": 10_000.0, "upstream": 4_000.0}
    cpu = {"ours-sync": 60.0, "bare-shipped": 30.0, "bare-default": 50.0, "upstream": 200.0}
    slower = {k: v / 2 for k, v in sps.items()}
    raw = {"rounds": [_round(sps, cpu), _round(slower, cpu), _round(sps, cpu)]}
    summary = report.summarise(raw)
    assert summary["medians"]["ours-sync"]["sps_64"] == 10_000.0
    ratios = summary["ratios"]["ours-sync"]
    assert ratios["bare-shipped"]["sps_64"] == 0.5
    assert ratios["upstream"]["sps_64"] == 2.5
    assert ratios["bare-shipped"]["cpu_us_64"] == 2.0
    goals = {g["goal"]: g for g in summary["goals"] if g["target"] == "ours-sync"}
    assert goals["throughput @64 ≥ 2.5x upstream"]["met"] is True
    assert goals["throughput @64 ≥ 0.9x bare echo (same stack)"]["met"] is False
    assert goals["idle RSS ≤ 60 MiB"]["met"] is True


def test_batched_throughput_is_compared_to_the_references_plain_steps() -> None:
    sps = {"ours-sync": 10_000.0, "bare-shipped": 20_000.0}
    cpu = {"ours-sync": 60.0, "bare-shipped": 30.0}
    rnd = _round(sps, cpu)
    rnd["ours-sync"]["phases"].append({"name": "batch-64", "kind": "batch", "sessions": 64, "batch": 16,
                                        "steps_per_s": 70_000.0, "server_cpu_us_per_step": 10.0, "errors": 0})
    summary = report.summarise({"rounds": [rnd]})
    assert summary["medians"]["ours-sync"]["batch_sps_64"] == 70_000.0
    ratio = summary["ratios"]["ours-sync"]["bare-shipped"]
    assert ratio["batch_sps_64"] == 3.5  # ÷ the bare echo's one-step-per-frame steps/s
    assert ratio["batch_cpu_us_64"] == round(10 / 30, 3)
    (goal,) = [g for g in summary["goals"] if g["metric"] == "batch_sps_64"]
    assert goal["met"] is True and goal["measured"] == 3.5


def test_batch_frame_carries_the_step_action_n_times() -> None:
    import json

    from bench.targets import STEP_FRAME, batch_frame

    frame = json.loads(batch_frame(3))
    assert frame["type"] == "step_batch"
    assert frame["data"]["actions"] == [json.loads(STEP_FRAME)["data"]] * 3


def test_client_rows_print_ratio_and_goals() -> None:
    import io

    from rich.console import Console

    out = io.StringIO()
    client = {"rest": {"steps_per_round": 100, "rounds": 3, "client_ms": 4.0, "raw_httpx_ms": 2.0, "ratio": 0.5,
                       "goal": 0.8, "met": False},
              "cli": {"runs": 5, "help_s": 0.6, "python_pass_s": 0.02, "help_over_python_s": 0.58,
                      "goal_s": 1.0, "met": True}}
    report.print_client(client, Console(file=out, width=250, color_system=None))
    text = out.getvalue()
    assert "0.50x" in text and "≥ 0.8x not met" in text
    assert "< 1.0 s met" in text and "+0.58 s" in text
    out = io.StringIO()
    report.print_client({"rest": {"failed": "start: boom"}, "cli": {"failed": "exit 1"}},
                        Console(file=out, width=250, color_system=None))
    assert out.getvalue().count("FAILED") == 2


def test_the_coding_grading_bench_has_the_real_fix_of_every_built_in_task() -> None:
    from bench.codinggrade import ORACLES
    from openenv_env_coding.tasks import load_tasks

    assert set(ORACLES) == {task.id for task in load_tasks()}
