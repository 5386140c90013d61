"""Fixtures: a fake Daytona API on 127.0.0.1 (``daytona_fake``) with the real SDK pointed at it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from daytona_fake import FakeDaytona

API_KEY = "test-key-0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDaytona]:
    bin_dir = os.path.dirname(sys.executable)  # the sandbox runs `openenv serve` from this venv
    with FakeDaytona(API_KEY, extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("DAYTONA_API_KEY", API_KEY)
        monkeypatch.setenv("DAYTONA_API_URL", server.url)
        monkeypatch.delenv("DAYTONA_TARGET", raising=False)
        yield server
