"""Shared fixtures of the harbor plugin's tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def usable_bwrap() -> None:
    """Skip without a bubblewrap that can start a box here (fail instead with OPENENV_REQUIRE_BWRAP=1)."""
    from openenv_harbor.box import bwrap_problem

    reason = bwrap_problem()
    if reason:
        if os.environ.get("OPENENV_REQUIRE_BWRAP", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"OPENENV_REQUIRE_BWRAP is set but {reason}", pytrace=False)
        pytest.skip(reason)
