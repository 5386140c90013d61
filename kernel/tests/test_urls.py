"""``openenv.urls``: loopback detection and http ↔ ws base URLs."""

from __future__ import annotations

import pytest

from openenv.urls import http_base_url, is_loopback, ws_base_url


@pytest.mark.parametrize(("host", "loopback"), [
    ("localhost", True), ("LOCALHOST", True), ("api.localhost", True), ("127.0.0.1", True),
    ("127.8.9.10", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("10.0.0.1", False),
    ("example.com", False), ("localhost.example.com", False), ("", False), (None, False),
])
def test_is_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(("base", "expected"), [
    ("http://h:8000", "ws://h:8000"),
    ("https://h/prefix/", "wss://h/prefix"),
    ("HTTPS://h", "wss://h"),
    ("ws://h:1", "ws://h:1"),
    ("wss://h/p", "wss://h/p"),
    ("localhost:8000", "ws://localhost:8000"),  # no scheme: upstream's rule
    ("  http://[::1]:9/  ", "ws://[::1]:9"),
])
def test_ws_base_url(base: str, expected: str) -> None:
    assert ws_base_url(base) == expected


def test_ws_base_url_refuses_what_it_cannot_convert() -> None:
    with pytest.raises(ValueError, match=r"Unsupported URL scheme 'ftp'.*use http, https, ws or wss"):
        ws_base_url("ftp://h")
    with pytest.raises(ValueError, match="has no host"):
        ws_base_url("http://")


@pytest.mark.parametrize(("base", "expected"), [
    ("ws://h:1", "http://h:1"),
    ("wss://h/prefix/", "https://h/prefix"),
    ("http://h", "http://h"),
    ("h:8000", "http://h:8000"),
    ("http://h/p?x=1#f", "http://h/p"),
    ("gopher://h", "http://h"),  # lenient on purpose: an unknown scheme means plain HTTP
])
def test_http_base_url(base: str, expected: str) -> None:
    assert http_base_url(base) == expected


def test_the_two_directions_agree() -> None:
    for base in ("http://127.0.0.1:8000", "https://host/prefix"):
        assert http_base_url(ws_base_url(base)) == base
