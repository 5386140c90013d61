"""Fixtures for the bwrap provider tests: a private state directory per test, a guard that fails
any test leaving a process behind, and ``usable_bwrap``, which skips without a working bubblewrap
(or fails, when ``OPENENV_REQUIRE_BWRAP=1`` as in CI: ``.ci/bwrap-setup.sh`` installs it)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.interfaces import EngineUnavailable
from openenv.testing.waiting import wait_until
from openenv_provider_local.process import descendants


def skip_or_fail(reason: str) -> None:
    """Skip, or fail when ``OPENENV_REQUIRE_BWRAP=1`` (CI must not skip the real sandbox)."""
    if os.environ.get("OPENENV_REQUIRE_BWRAP", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_BWRAP is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def usable_bwrap() -> str:
    """The bwrap executable, once a test sandbox started here."""
    from openenv_provider_bwrap.provider import preflight

    try:
        return preflight()
    except EngineUnavailable as exc:
        skip_or_fail(str(exc))
        raise AssertionError("unreachable") from None


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own state directory (records, logs, scratch folders)."""
    path = tmp_path / "state"
    monkeypatch.setenv("OPENENV_STATE_DIR", str(path))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    return path


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Fail a test that leaves a child process running (and kill what it left)."""
    before = set(descendants(os.getpid()))
    yield
    left: list[int] = []
    if not wait_until(lambda: not (set(descendants(os.getpid())) - before), timeout_s=5.0):
        left = sorted(set(descendants(os.getpid())) - before)
        for pid in left:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    assert not left, f"test left processes running: {left}"
