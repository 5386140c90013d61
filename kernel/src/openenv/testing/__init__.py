"""Helpers for testing OpenEnv plugins.

* Fakes (no pytest needed): ``FakeEntryPoint`` / ``make_entry_point`` stand in for installed
  entry points, ``make_plugin_module`` builds an in-memory plugin module from hook functions.
* Fixtures: opt in with ``pytest_plugins = ["openenv.testing.fixtures"]`` in a top-level
  ``conftest.py`` (see ``openenv.testing.fixtures``).

This package never imports pytest itself; only ``openenv.testing.fixtures`` does.
"""

from __future__ import annotations

from openenv.testing.fakes import (
    FakeDistribution,
    FakeEntryPoint,
    make_entry_point,
    make_plugin_module,
)

__all__ = ["FakeDistribution", "FakeEntryPoint", "make_entry_point", "make_plugin_module"]
