"""Fixtures: a fake ACA data plane over HTTPS on 127.0.0.1 with a self-signed certificate."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from aca_fake import TOKEN, FakeAca

from openenv.testing.boundary import self_signed_cert


@pytest.fixture(scope="session")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def fake(cert: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAca]:
    bin_dir = os.path.dirname(sys.executable)  # the "sandbox" runs `openenv serve` from this venv
    with FakeAca(TOKEN, *cert, extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("ACA_ENDPOINT", server.url)
        monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", "00000000-0000-0000-0000-000000000000")
        monkeypatch.setenv("AZURE_RESOURCE_GROUP", "rg-test")
        monkeypatch.setenv("ACA_SANDBOX_GROUP", "sg-test")
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", cert[0])  # trust the self-signed certificate
        yield server
