"""Fixtures of the compatibility-layer tests: the upstream-style fixture packages, served for real.

``tests/compat_layer/fixtures`` goes on ``sys.path`` so the fixture packages import the way an
installed env package would (``upstream_style_echo.server.app``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from layer_helpers import FIXTURES, serving

if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``compat``: ``nox -s compat`` selects with ``-m compat``, and
    this layer is what that session is for (a hook of a sub-folder's conftest sees every item, so
    only this folder's are marked)."""
    for item in items:
        if _HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.compat)


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
