"""Fixtures for the rubrics plugin tests: a plugin manager that sees only this plugin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import openenv_rubrics.plugin
from openenv.plugins import PluginManager, reset_plugin_manager


@pytest.fixture(autouse=True)
def rubrics_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[PluginManager]:
    """The process-wide plugin manager sees this plugin alone (never ambient entry points)."""
    for var in ("OPENENV_JUDGE_BASE_URL", "OPENENV_JUDGE_MODEL", "OPENENV_JUDGE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_rubrics.plugin, name="rubrics")
    reset_plugin_manager(pm)
    yield pm
    reset_plugin_manager(None)
