"""``openenv.testing.boundary`` and the CLI import check: the pieces the cloud providers' tests share."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import sys
import threading
from pathlib import Path

import pytest

from openenv.testing import ContractError, check_cli_imports, cli_imports, orphan_from, self_signed_cert


def _tls_hello(cert: str, key: str, client_ctx: ssl.SSLContext) -> bytes:
    """Serve one TLS connection on 127.0.0.1 with ``cert``; connect with ``client_ctx``; return what it read."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(10)

        def accept() -> None:
            conn, _ = listener.accept()
            with conn, contextlib.suppress(ssl.SSLError, OSError), \
                    server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"hello")

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            with socket.create_connection(listener.getsockname(), timeout=10) as raw, \
                    client_ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                return tls.recv(5)
        finally:
            thread.join(10)


def test_self_signed_cert_is_trusted_for_127_0_0_1_by_a_client_that_trusts_it(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    # verifies the chain and that the certificate names the IP address
    assert _tls_hello(cert, key, ssl.create_default_context(cafile=cert)) == b"hello"


def test_self_signed_cert_is_refused_by_a_client_that_does_not(tmp_path: Path) -> None:
    cert, key = self_signed_cert(tmp_path)
    (tmp_path / "other").mkdir()
    other, _ = self_signed_cert(tmp_path / "other")  # another certificate of the same name
    with pytest.raises(ssl.SSLCertVerificationError):
        _tls_hello(cert, key, ssl.create_default_context(cafile=other))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_orphan_from_returns_the_first_line_and_kills_the_helper() -> None:
    helper = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(60)"
    pid = int(orphan_from([sys.executable, "-c", helper], timeout_s=30))
    assert not _alive(pid)


def test_orphan_from_reports_a_helper_that_ends_without_an_id() -> None:
    helper = "import sys; sys.stderr.write('no server for you'); sys.exit(3)"
    with pytest.raises(ContractError, match=r"(?s)ended without printing a handle id \(exit 3\).*no server for you"):
        orphan_from([sys.executable, "-c", helper], timeout_s=30)


def test_orphan_from_bounds_a_helper_that_hangs() -> None:
    with pytest.raises(ContractError, match=r"printed nothing within 1s \(exit -9\)"):
        orphan_from([sys.executable, "-c", "import time; time.sleep(60)"], timeout_s=1)


def test_cli_imports_sees_the_cli_and_check_cli_imports_bites() -> None:
    modules = cli_imports("--help")
    assert "openenv.cli" in modules and "json" in modules
    check_cli_imports(["--help"], loaded="openenv.cli", forbidden=["uvicorn*", "starlette*"])
    with pytest.raises(ContractError, match=r"imported what it must not: openenv\.cli"):
        check_cli_imports(["--help"], loaded="openenv.cli", forbidden=["openenv.cli*"])
    with pytest.raises(ContractError, match=r"did not import 'openenv_provider_nowhere\.plugin'"):
        check_cli_imports(["--help"], loaded="openenv_provider_nowhere.plugin", forbidden=[])


def test_cli_imports_reports_a_failing_command() -> None:
    with pytest.raises(ContractError, match="exited with code"):
        cli_imports("no-such-command")


def test_a_stand_in_sends_the_exact_date_of_each_response_once() -> None:
    """uvicorn refreshes its Date header once a second (and later under load); a stand-in sends the
    time of the response, once, and keeps a Date the app set itself."""
    import time
    import urllib.request
    from email.utils import parsedate_to_datetime

    from openenv.testing import StandIn

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        own = [(b"date", b"Mon, 01 Jan 2024 00:00:00 GMT")] if scope["path"] == "/own" else []
        await send({"type": "http.response.start", "status": 200, "headers": own})
        await send({"type": "http.response.body", "body": b"ok"})

    stand_in = StandIn(app, "dated")
    url = stand_in.start()
    try:
        for _ in range(5):
            with urllib.request.urlopen(f"{url}/", timeout=10) as reply:
                dates = reply.headers.get_all("date")
            assert len(dates) == 1
            assert abs(parsedate_to_datetime(dates[0]).timestamp() - time.time()) < 1.5
            time.sleep(0.3)
        with urllib.request.urlopen(f"{url}/own", timeout=10) as reply:
            assert reply.headers.get_all("date") == ["Mon, 01 Jan 2024 00:00:00 GMT"]
    finally:
        stand_in.stop()
