"""Fixtures of the compatibility-layer tests: the upstream-style fixture packages, served for real.

``tests/compat_layer/fixtures`` goes on ``sys.path`` so the fixture packages import the way an
installed env package would (``upstream_style_echo.server.app``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from layer_helpers import FIXTURES, serving

if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))


@pytest.fixture(scope="session")
def echo_url() -> Iterator[str]:
    """The upstream-style echo env's ``server/app.py`` app, served on 127.0.0.1 (4 sessions)."""
    from upstream_style_echo.server.app import app

    with serving(app) as url:
        yield url


@pytest.fixture(scope="session")
def mcp_echo_url() -> Iterator[str]:
    """The upstream-style MCP echo env's app (FastMCP tools, 2 sessions)."""
    from upstream_style_mcp_echo.server.app import app

    with serving(app) as url:
        yield url


@pytest.fixture(scope="session")
def guess_url() -> Iterator[str]:
    """The guessing game's app (async env, rubric, factory function, 8 sessions)."""
    from upstream_style_guess.server.app import app

    with serving(app) as url:
        yield url
