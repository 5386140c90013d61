"""Fixtures: a fake Modal control plane on 127.0.0.1 (``fake``) with the real SDK pointed at it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from modal_fake import FakeModal

from openenv.testing.boundary import self_signed_cert

TOKEN_ID = "ak-test0123456789"
TOKEN_SECRET = "as-test0123456789"


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def fake(cert: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModal]:
    bin_dir = os.path.dirname(sys.executable)  # the "sandbox" runs `openenv serve` from this venv
    with FakeModal(TOKEN_ID, TOKEN_SECRET, cert=cert[0], key=cert[1], workdir=tmp_path,
                   extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("MODAL_TOKEN_ID", TOKEN_ID)
        monkeypatch.setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET)
        monkeypatch.setenv("MODAL_SERVER_URL", server.url)
        # The tunnels' TLS relays use the test's self-signed certificate; the kernel's probe and the
        # WebSocket client trust the default verify paths, which SSL_CERT_FILE replaces.
        monkeypatch.setenv("SSL_CERT_FILE", cert[0])
        for name in ("MODAL_PROFILE", "MODAL_ENVIRONMENT", "MODAL_SANDBOX_V2", "OPENENV_MODAL_APP"):
            monkeypatch.delenv(name, raising=False)
        yield server
