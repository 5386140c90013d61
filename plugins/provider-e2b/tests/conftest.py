"""Fixtures: a fake E2B API and envd on 127.0.0.1 (``e2b_fake``) with the real SDK pointed at it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from e2b_fake import FakeE2B

API_KEY = "e2b_test_0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeE2B]:
    bin_dir = os.path.dirname(sys.executable)  # the sandbox runs `openenv serve` from this venv
    with FakeE2B(API_KEY, extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("E2B_API_KEY", API_KEY)
        monkeypatch.setenv("E2B_API_URL", server.url)
        monkeypatch.setenv("E2B_SANDBOX_URL", server.url)
        monkeypatch.setenv("E2B_HTTP_VERSION", "1.1")  # uvicorn speaks HTTP/1.1 (E2B's edge: HTTP/2)
        monkeypatch.delenv("E2B_DOMAIN", raising=False)
        monkeypatch.delenv("E2B_DEBUG", raising=False)
        yield server
