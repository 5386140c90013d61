"""The read-time header counter counts only the header block still open (issue 34, item 1).

Fed straight to the protocol, so each burst is exactly one socket read, as a fast client's
pipelined requests are.
"""

from __future__ import annotations

import asyncio

import pytest

from openenv_serve_uvicorn.connections import REQUEST_LINE_ALLOWANCE, _block_bytes

GET = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


@pytest.mark.parametrize("count", [100, 2_300, 2_500, 5_000])
@pytest.mark.parametrize("tail", [b"", b"GET /hea", b"GET /health HTTP/1.1\r\nHost: x\r\n"])
async def test_a_pipelined_burst_in_one_read_is_not_refused(http_protocol, count: int, tail: bytes) -> None:  # type: ignore[no-untyped-def]
    proto, transport = http_protocol()
    proto.data_received(GET * count + tail)
    await asyncio.sleep(0)
    assert b" 431 " not in transport.written and not transport.closed
    assert proto._oe_header_bytes == len(tail)


async def test_a_body_before_the_open_block_is_not_counted_as_its_headers(http_protocol) -> None:  # type: ignore[no-untyped-def]
    # The body starts with a blank line, so the read's last blank line is before 200 KB of body.
    body = b"\r\n\r\n" + b"b" * 200_000
    post = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    proto, transport = http_protocol()
    proto.data_received(post + b"GET /hea")
    assert b" 431 " not in transport.written and not transport.closed
    assert proto._oe_header_bytes <= len(b"GET /hea")


async def test_an_oversized_block_after_pipelined_requests_is_refused_within_one_read(http_protocol) -> None:  # type: ignore[no-untyped-def]
    proto, transport = http_protocol(max_header_bytes=65536)
    cap = 65536 + REQUEST_LINE_ALLOWANCE
    proto.data_received(GET * 2_500 + b"GET /health HTTP/1.1\r\nx-big: ")
    fed = 0
    for _ in range(64):  # 64 x 64 KiB: far past the cap
        if transport.closed:
            break
        proto.data_received(b"a" * 65536)
        fed += 65536
    assert transport.closed and b"HTTP/1.1 431" in transport.written
    assert b'"code":"HEADERS_TOO_LARGE"' in transport.written
    assert fed <= cap + 65536


async def test_one_read_of_a_huge_value_is_refused_at_once(http_protocol) -> None:  # type: ignore[no-untyped-def]
    proto, transport = http_protocol()
    proto.data_received(b"GET /health HTTP/1.1\r\nx-big: " + b"a" * 200_000)
    assert transport.closed and b"HTTP/1.1 431" in transport.written


def test_block_bytes() -> None:
    assert _block_bytes(b"abc", began=False, body_seen=0) == 3  # the block continues: all of it
    assert _block_bytes(GET * 3 + b"GET /x", began=True, body_seen=0) == 6
    assert _block_bytes(b"GET /x", began=True, body_seen=0) == 6
    assert _block_bytes(b"H\r\n\r\n" + b"b" * 10 + b"GET /x", began=True, body_seen=10) == 6
