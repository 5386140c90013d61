"""Fixtures for the local provider tests: a private state directory per test and a guard that
fails any test leaving a process behind (helpers live in ``provider_local_support``)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from provider_local_support import descendants, wait_until


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own state directory (records and logs)."""
    path = tmp_path / "state"
    monkeypatch.setenv("OPENENV_STATE_DIR", str(path))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    return path


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Fail a test that leaves a child process running (and kill what it left)."""
    before = set(descendants())
    yield
    left: list[int] = []
    if not wait_until(lambda: not (set(descendants()) - before), timeout_s=5.0):
        left = sorted(set(descendants()) - before)
        for pid in left:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    assert not left, f"test left processes running: {left}"
