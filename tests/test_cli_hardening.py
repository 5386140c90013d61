"""``openenv serve`` hardening (issue 21): an open wide bind is refused, limits reach the server."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


@pytest.fixture
def busy_port() -> object:
    """A port held by a listener on 127.0.0.1: should the refusal ever regress, binding the wide
    address on it fails too, so the test never opens a non-loopback listener."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_a_wide_bind_without_a_token_is_refused(openenv_cli, busy_port, host: str) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("serve", "echo", "--host", host, "--port", str(busy_port))
    assert out.returncode == 2, out.stderr
    assert f"Refusing to serve on {host} without a token" in out.stderr
    assert "--allow-open" in out.stderr and "OPENENV_TOKEN" in out.stderr
    assert "Traceback" not in out.stderr


def test_isolation_must_be_thread_or_process(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("serve", "echo", "--isolation", "fork", "--port", "0")
    assert out.returncode == 2
    assert "isolation must be 'thread' or 'process'" in out.stderr


def test_a_bad_tokens_file_is_a_usage_error(openenv_cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "tokens.json"
    bad.write_text('["not", "a", "mapping"]')
    out = openenv_cli("serve", "echo", "--tokens-file", str(bad), "--port", "0")
    assert out.returncode == 2 and "must hold a non-empty JSON object" in out.stderr
    out = openenv_cli("serve", "echo", "--tokens-file", str(tmp_path / "missing.json"), "--port", "0")
    assert out.returncode == 2 and "Cannot read --tokens-file" in out.stderr
