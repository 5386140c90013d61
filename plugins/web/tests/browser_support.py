"""Launching Debian's Chromium through Playwright for the browser tests and bench/web.py.

Only the system browser is used (``/usr/bin/chromium``, or ``$OPENENV_CHROMIUM``): nothing is
downloaded. ``chromium_path()`` is ``None`` when it is missing, so tests can skip — unless
``OPENENV_REQUIRE_BROWSER=1``, which turns the absence into a failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["CHROMIUM_ARGS", "chromium", "chromium_path", "need_env", "require_browser"]

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    path = os.environ.get("OPENENV_CHROMIUM") or "/usr/bin/chromium"
    return path if os.path.exists(path) and os.access(path, os.X_OK) else None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A fresh-profile headless Chromium: yields Playwright's ``Browser`` (fresh user-data-dir)."""
    from playwright.sync_api import sync_playwright

    path = chromium_path()
    if path is None:
        raise RuntimeError("No Chromium at /usr/bin/chromium: run `bash .ci/browser-setup.sh` "
                           "(or set OPENENV_CHROMIUM to a Chromium binary).")
    # launch() gives the browser a fresh temporary user-data-dir of its own (Playwright refuses an
    # explicit --user-data-dir there), removed when the browser closes.
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def require_browser() -> bool:
    """Whether a missing browser (or env package) must fail the tests instead of skipping them."""
    return os.environ.get("OPENENV_REQUIRE_BROWSER") == "1"


def need_env(module: str) -> None:
    """Skip (or, with OPENENV_REQUIRE_BROWSER=1, fail) when an env package is not installed."""
    try:
        __import__(module)
    except ImportError:
        if require_browser():
            pytest.fail(f"OPENENV_REQUIRE_BROWSER=1 but {module} is not installed")
        pytest.skip(f"{module} is not installed")
