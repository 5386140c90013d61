"""Fixtures of the rollouts tests: the test env and policies importable by the env server too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def importable_here(monkeypatch: pytest.MonkeyPatch, state_dir: Path) -> None:
    """``count_env`` and ``policies_for_tests`` import in this process and in local env servers."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("OPENENV_STATE_DIR", str(state_dir))
    monkeypatch.delenv("COUNT_ENV_CRASH", raising=False)
