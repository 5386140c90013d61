"""Repository-wide pytest hook: the ``requires_plugins`` marker.

A test of one package that also needs other packages of this repository declares them::

    @pytest.mark.requires_plugins("transport-ws", "provider-local")

Names are distribution names without the ``openenvkit-`` prefix (``transport-mcp``, ``env-echo``,
``rubrics``). ``nox -s packages`` tests each package with only the kernel installed, so there such a
test skips; ``nox -s integration`` installs everything and runs ``tests/`` plus only the package
tests carrying this marker (``-m requires_plugins``), instead of every package's tests a second time.
There ``OPENENV_REQUIRE_PLUGINS=1`` turns a missing plugin into a failure, so a broken install
cannot pass as a skip.

This file is not part of any distribution: it applies to tests run from a checkout.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
PREFIX = "openenvkit-"


@cache
def known_plugins() -> frozenset[str]:
    """Every plugin/env distribution of this repository, by its marker name."""
    names = set()
    for project in [*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("envs/*/pyproject.toml")]:
        name = tomllib.loads(project.read_text(encoding="utf-8"))["project"]["name"]
        names.add(name.removeprefix(PREFIX))
    return frozenset(names)


def _installed(name: str) -> bool:
    try:
        metadata.distribution(PREFIX + name)
    except metadata.PackageNotFoundError:
        return False
    return True


def required_plugins(item: pytest.Item) -> list[str]:
    """The plugin names an item's ``requires_plugins`` markers ask for (every marker, in order)."""
    names: list[str] = []
    for mark in item.iter_markers("requires_plugins"):
        if not mark.args:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.requires_plugins needs at least one plugin "
                                    f"name, e.g. requires_plugins(\"transport-ws\")")
        names += [str(a) for a in mark.args]
    return names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Checked at collection so a misspelt name fails every run, not only the one where it is missing.
    known = known_plugins()
    for item in items:
        for name in required_plugins(item):
            if name not in known:
                close = difflib.get_close_matches(name.removeprefix(PREFIX), sorted(known), n=1)
                hint = f" Did you mean {close[0]!r}?" if close else f" Known: {', '.join(sorted(known))}."
                raise pytest.UsageError(f"{item.nodeid}: requires_plugins({name!r}) names no plugin or env of "
                                        f"this repository (a distribution name without {PREFIX!r}).{hint}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    missing = [name for name in required_plugins(item) if not _installed(name)]
    if not missing:
        return
    dists = ", ".join(PREFIX + name for name in missing)
    if os.environ.get("OPENENV_REQUIRE_PLUGINS") == "1":
        pytest.fail(f"needs {dists}, which is not installed although OPENENV_REQUIRE_PLUGINS=1 "
                    f"(nox -s integration installs every package: check that session's install step)",
                    pytrace=False)
    pytest.skip(f"needs {dists} (installed together in `nox -s integration`)")
