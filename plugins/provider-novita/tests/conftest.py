"""Fixtures: a fake Novita API and envd on 127.0.0.1 (``novita_fake``) with the real SDK pointed at it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from novita_fake import FakeNovita

API_KEY = "sk_test_0123456789"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNovita]:
    bin_dir = os.path.dirname(sys.executable)  # the sandbox runs `openenv serve` from this venv
    with FakeNovita(API_KEY, extra_env={"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}) as server:
        monkeypatch.setenv("NOVITA_API_KEY", API_KEY)
        monkeypatch.setenv("NOVITA_API_URL", server.url)
        monkeypatch.setenv("NOVITA_SANDBOX_URL", server.url)
        for name in ("NOVITA_DOMAIN", "NOVITA_DEBUG", "NOVITA_ACCESS_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        yield server
