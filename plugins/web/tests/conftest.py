"""Fixtures of the web plugin's tests: a real server on 127.0.0.1 and Debian's headless Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import chromium, chromium_path


def _require() -> bool:
    return os.environ.get("OPENENV_REQUIRE_BROWSER") == "1"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session; skipped without it (failed if OPENENV_REQUIRE_BROWSER=1)."""
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the `playwright` package is not installed (pip install 'openenvkit-web[browser]')"
    if missing is None and chromium_path() is None:
        missing = "no Chromium at /usr/bin/chromium (run `bash .ci/browser-setup.sh`)"
    if missing is not None:
        if _require():
            pytest.fail(f"OPENENV_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    with chromium() as b:
        yield b


def need_env(module: str) -> None:
    """Skip (or, with OPENENV_REQUIRE_BROWSER=1, fail) when an env package is not installed."""
    try:
        __import__(module)
    except ImportError:
        if _require():
            pytest.fail(f"OPENENV_REQUIRE_BROWSER=1 but {module} is not installed")
        pytest.skip(f"{module} is not installed")
