"""Opt-in pytest plugin for plugin authors: fresh plugin managers and fake entry points.

Enable it in your top-level ``conftest.py``::

    pytest_plugins = ["openenv.testing.fixtures"]

Fixtures:

* ``plugin_manager`` – a fresh strict ``PluginManager`` with the kernel's built-in plugin only
  (no installed entry points are discovered). Register your plugin with
  ``plugin_manager.register(my_plugin_module)`` or ``plugin_manager.load_entry_point(ep)``.
* ``fake_entry_point`` – factory building entry points that were never installed
  (``fake_entry_point("mine", module)``, ``fake_entry_point("broken", error=ImportError("x"))``).
* ``plugin_module`` – factory building an in-memory plugin module from hook functions.
* ``use_plugin_manager`` – ``use_plugin_manager(pm)`` makes ``pm`` the process-wide manager (what
  the CLI uses) until the test ends, then restores the previous one.
* ``live_server`` – factory: ``live_server(env, **settings)`` starts a real uvicorn server on
  127.0.0.1 (see ``openenv.testing.live``) and returns the running ``LiveServer``; every server
  it started is stopped when the test ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openenv.plugins import PluginManager, reset_plugin_manager
from openenv.testing.fakes import make_entry_point, make_plugin_module
from openenv.testing.live import LiveServer
from openenv.testing.live import live_server as _live_server

__all__ = ["fake_entry_point", "live_server", "plugin_manager", "plugin_module", "use_plugin_manager"]


@pytest.fixture
def plugin_manager() -> PluginManager:
    """A fresh strict manager: built-ins only, no ambient entry points."""
    return PluginManager(strict=True, entry_points=[])


@pytest.fixture
def fake_entry_point() -> Callable[..., Any]:
    """Factory: ``fake_entry_point(name, target=None, *, value=, dist=, version=, error=)``."""
    return make_entry_point


@pytest.fixture
def plugin_module() -> Callable[..., Any]:
    """Factory: ``plugin_module(*hook_functions, name=None, **attrs)`` -> module object."""
    return make_plugin_module


@pytest.fixture
def use_plugin_manager() -> Iterator[Callable[[PluginManager], PluginManager]]:
    """Install a manager as the process-wide one for this test; restore the old one after."""
    import openenv.plugins as plugins_module

    previous = plugins_module._GLOBAL

    def use(pm: PluginManager) -> PluginManager:
        reset_plugin_manager(pm)
        return pm

    try:
        yield use
    finally:
        reset_plugin_manager(previous)


@pytest.fixture
def live_server() -> Iterator[Callable[..., LiveServer]]:
    """Factory: ``live_server(env, *, transports=None, plugin_manager=None, **settings)``."""
    with contextlib.ExitStack() as stack:

        def start(env: Any, **settings: Any) -> LiveServer:
            return stack.enter_context(_live_server(env, **settings))

        yield start
