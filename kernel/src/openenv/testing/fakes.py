"""Stand-ins for installed plugins, for tests of plugin discovery (no pytest needed).

``FakeEntryPoint`` behaves like ``importlib.metadata.EntryPoint`` as far as the plugin manager
cares (``.name``, ``.value``, ``.group``, ``.dist.name``/``.dist.version``, ``.load()``), so a test
can hand ``PluginManager(entry_points=[...])`` a plugin that was never installed, a plugin whose
import fails, or one that points at a real importable module.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = [
    "FakeDistribution",
    "FakeEntryPoint",
    "make_catalogue_plugin",
    "make_entry_point",
    "make_plugin_module",
]

_counter = itertools.count(1)


@dataclass(frozen=True)
class FakeDistribution:
    """The ``.dist`` of a fake entry point: the distribution name and version shown by listings."""

    name: str
    version: str = "0.0.0"


class FakeEntryPoint:
    """An entry point of group ``openenv`` that was never installed.

    ``load()`` returns ``target`` (a module object or any plugin object); imports it when it is a
    ``"module"`` / ``"module:attr"`` string (as a real entry point does); or raises ``error``
    when that is given. ``loads`` counts the calls, so tests can check that a disabled plugin
    is never loaded.
    """

    group = "openenv"

    def __init__(
        self,
        name: str,
        target: Any = None,
        *,
        value: str | None = None,
        dist: FakeDistribution | str | None = "",
        version: str = "0.0.0",
        error: BaseException | type[BaseException] | None = None,
    ) -> None:
        if target is None and error is None:
            raise ValueError("FakeEntryPoint needs a target to load or an error to raise")
        self.name = name
        self.target = target
        self.error = error
        if value is None:
            if isinstance(target, str):
                value = target
            elif isinstance(target, ModuleType):
                value = target.__name__
            else:
                value = f"fake_{name}_plugin"
        self.value = value
        if isinstance(dist, str):
            dist = FakeDistribution(dist or f"fake-{name}", version)
        self.dist = dist
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        if self.error is not None:
            raise self.error
        if isinstance(self.target, str):
            module_name, _, attr_path = self.target.partition(":")
            obj: Any = importlib.import_module(module_name)
            for part in filter(None, attr_path.split(".")):
                obj = getattr(obj, part)
            return obj
        return self.target

    def __repr__(self) -> str:
        return f"FakeEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def make_entry_point(
    name: str,
    target: Any = None,
    *,
    value: str | None = None,
    dist: FakeDistribution | str | None = "",
    version: str = "0.0.0",
    error: BaseException | type[BaseException] | None = None,
) -> FakeEntryPoint:
    """Build a ``FakeEntryPoint`` (see its docstring); ``dist`` defaults to ``fake-<name>``."""
    return FakeEntryPoint(name, target, value=value, dist=dist, version=version, error=error)


def make_plugin_module(
    *hooks: Callable[..., Any], name: str | None = None, **attrs: Any
) -> ModuleType:
    """A module object holding ``hooks`` under their own ``__name__`` (plus any ``attrs``).

    Decorate the functions with ``@openenv.hookimpl`` as a real plugin would; a misspelled or
    undecorated function is kept as is, so tests can check how the kernel reports it. The module
    is not put in ``sys.modules``.
    """
    module = ModuleType(name or f"openenv_fake_plugin_{next(_counter)}")
    module.__doc__ = "In-memory plugin built by openenv.testing.make_plugin_module."
    for hook in hooks:
        setattr(module, hook.__name__, hook)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


_CATALOGUE_HOOKS = {
    "envs": "openenv_register_envs",
    "transports": "openenv_register_transports",
    "providers": "openenv_register_providers",
    "rubrics": "openenv_register_rubrics",
    "commands": "openenv_register_commands",
}


def make_catalogue_plugin(name: str | None = None, **kinds: dict[str, Any]) -> ModuleType:
    """A plugin module whose catalogue hooks register the given names, as a real plugin would.

    Each keyword is a kind (``envs``, ``transports``, ``providers``, ``rubrics``, ``commands``)
    mapping names to what ``registry.register`` takes after the name: a reference string, or a
    dict of keyword arguments (``{"server": "...", "client": "..."}`` for a transport)::

        make_catalogue_plugin(envs={"echo": "my_pkg.env:EchoEnv"},
                              transports={"t": {"server": "pkg.s:T", "client": None}})
    """
    from openenv.hookspecs import hookimpl

    unknown = sorted(set(kinds) - set(_CATALOGUE_HOOKS))
    if unknown:
        raise TypeError(f"make_catalogue_plugin() got unknown kind(s) {', '.join(unknown)}; use "
                        f"{', '.join(_CATALOGUE_HOOKS)}")
    hooks = []
    for kind, names in kinds.items():
        def register_all(registry: Any, _names: dict[str, Any] = names) -> None:
            for entry_name, what in _names.items():
                if isinstance(what, dict):
                    registry.register(entry_name, **what)
                else:
                    registry.register(entry_name, what)

        register_all.__name__ = _CATALOGUE_HOOKS[kind]
        hooks.append(hookimpl(register_all))
    return make_plugin_module(*hooks, name=name)
