"""Fixtures of the web plugin's tests: a real server on 127.0.0.1 and Debian's headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_support import chromium, chromium_path, require_browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium per test module (Playwright's sync API keeps an event loop running on
    the main thread while it is open, which would break later tests that call asyncio.run);
    skipped without it (failed if OPENENV_REQUIRE_BROWSER=1)."""
    missing = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "the `playwright` package is not installed (pip install 'openenvkit-web[browser]')"
    if missing is None and chromium_path() is None:
        missing = "no Chromium at /usr/bin/chromium (run `bash .ci/browser-setup.sh`)"
    if missing is not None:
        if require_browser():
            pytest.fail(f"OPENENV_REQUIRE_BROWSER=1 but {missing}")
        pytest.skip(missing)
    with chromium() as b:
        yield b
