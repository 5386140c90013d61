"""Fixtures for the slurm provider tests: a private state directory per test, ``cluster`` (skips
without a one-node Slurm cluster, fails instead when ``OPENENV_REQUIRE_SLURM=1`` as in CI, where
``.ci/slurm-setup.sh`` starts one) and a guard that fails a test leaving an ``openenv-`` job behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv.interfaces import EngineUnavailable
from openenv.testing.waiting import wait_until


def skip_or_fail(reason: str) -> None:
    """Skip, or fail when ``OPENENV_REQUIRE_SLURM=1`` (CI must not skip the real cluster)."""
    if os.environ.get("OPENENV_REQUIRE_SLURM", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_SLURM is set but {reason}", pytrace=False)
    pytest.skip(reason)


def openenv_jobs() -> list[str]:
    """Ids of this user's live jobs named ``openenv-…``."""
    out = subprocess.run(["squeue", "-h", "-o", "%i|%j|%T"], capture_output=True, text=True, timeout=20)
    return [line.split("|")[0] for line in out.stdout.splitlines()
            if line.split("|")[1].startswith("openenv-") and line.split("|")[2] in ("PENDING", "RUNNING",
                                                                                     "CONFIGURING", "COMPLETING")]


@pytest.fixture
def cluster() -> Iterator[None]:
    """A Slurm cluster that answers; afterwards no ``openenv-`` job may be left."""
    from openenv_provider_slurm.provider import slurm_available

    try:
        slurm_available()
    except EngineUnavailable as exc:
        skip_or_fail(f"no Slurm cluster here: {exc}")
    before = set(openenv_jobs())
    yield
    left = wait_until(lambda: not (set(openenv_jobs()) - before), timeout_s=15.0)
    stray = sorted(set(openenv_jobs()) - before)
    if stray:
        subprocess.run(["scancel", *stray], timeout=20, check=False)
    assert left or not stray, f"test left Slurm jobs: {stray}"


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state"
    monkeypatch.setenv("OPENENV_STATE_DIR", str(path))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    return path
