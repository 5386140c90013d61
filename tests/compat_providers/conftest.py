"""Tests of real third-party provider packages from the index, written for upstream OpenEnv.

They run in ``nox -s upstream_providers``, whose venv holds our kernel plus those packages
installed with ``--no-deps`` (their dependency on upstream's ``openenv`` distribution is satisfied
by ours, never by upstream's package) and their other dependencies listed explicitly. Every test
here is marked ``compat`` so the integration session (``-m "not compat"``) leaves them out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests ``compat`` (a sub-folder conftest's hook sees every item)."""
    for item in items:
        if _HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.compat)
