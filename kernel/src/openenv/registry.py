"""Typed registries that plugins fill through the catalogue hooks.

Entries hold lazy ``"module:Object"`` references: listing what is installed never imports a
plugin's heavy dependencies (a cloud SDK, a simulator). ``Entry.load()`` imports on first use.
Duplicate names are refused with a message naming both plugins.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import PluginError, UnknownNameError

__all__ = ["KINDS", "Catalog", "Entry", "Registry", "load_ref"]

#: The kinds of things plugins can register, in display order.
KINDS = ("env", "transport", "provider", "rubric", "command")


def load_ref(ref: Any) -> Any:
    """Resolve a ``"package.module:attr.path"`` reference; any other object is returned as is."""
    if not isinstance(ref, str):
        return ref
    module_name, sep, attr_path = ref.partition(":")
    if not sep or not module_name or not attr_path:
        raise PluginError(f"Invalid reference {ref!r}: expected 'package.module:Object'.")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class Entry:
    """One registered thing: its kind, name, lazy reference and the plugin that registered it."""

    kind: str
    name: str
    ref: Any
    plugin: str
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    _loaded: Any = field(default=None, repr=False, compare=False)

    @property
    def ref_text(self) -> str:
        if isinstance(self.ref, str):
            return self.ref
        mod = getattr(self.ref, "__module__", "?")
        return f"{mod}:{getattr(self.ref, '__qualname__', type(self.ref).__qualname__)}"

    def load(self) -> Any:
        """Import and return the referenced object (cached)."""
        if self._loaded is None:
            try:
                self._loaded = load_ref(self.ref)
            except Exception as exc:
                raise PluginError(
                    f"{self.kind} '{self.name}' (from plugin '{self.plugin}') could not be loaded "
                    f"from {self.ref_text}: {type(exc).__name__}: {exc}. Reinstall the plugin or "
                    f"check its dependencies."
                ) from exc
        return self._loaded

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"name": self.name, "ref": self.ref_text, "plugin": self.plugin}
        if self.description:
            row["description"] = self.description
        if self.extra:
            # Extras never override the core keys (a ``plugin=`` extra must not hide attribution).
            row.update({k: v for k, v in self.extra.items() if _jsonable(v) and k not in row})
        return row


def _jsonable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | type(None) | list | dict)


class Registry:
    """Registry of one kind. Plugins call ``register``; the kernel looks names up."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        #: Set by the plugin manager while a plugin's catalogue hook runs, for attribution.
        self.current_plugin: str = "<direct>"

    def register(self, name: str, ref: Any, *, description: str = "", **extra: Any) -> Entry:
        """Register ``name`` → ``ref`` (``"module:Object"`` preferred: it stays lazy).

        Raises ``PluginError`` if ``name`` is already taken, naming both plugins.
        """
        if not isinstance(name, str) or not name:
            raise PluginError(f"{self.kind} names must be non-empty strings, got {name!r}")
        if name in self._entries:
            first = self._entries[name]
            raise PluginError(
                f"Duplicate {self.kind} '{name}': registered by plugin '{first.plugin}' and again "
                f"by plugin '{self.current_plugin}'. Uninstall one of them, or disable one with "
                f"OPENENV_DISABLE_PLUGINS={self.current_plugin}."
            )
        entry = Entry(self.kind, name, ref, self.current_plugin, description, dict(extra))
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def load(self, name: str) -> Any:
        return self.get(name).load()

    def names(self) -> list[str]:
        return sorted(self._entries)

    def by_plugin(self, plugin: str) -> list[Entry]:
        return [e for e in self._entries.values() if e.plugin == plugin]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def __len__(self) -> int:
        return len(self._entries)


class Catalog:
    """All registries together: ``catalog.envs``, ``.transports``, ``.providers``, ``.rubrics``, ``.commands``."""

    def __init__(self) -> None:
        self.envs = Registry("env")
        self.transports = Registry("transport")
        self.providers = Registry("provider")
        self.rubrics = Registry("rubric")
        self.commands = Registry("command")

    def registry(self, kind: str) -> Registry:
        return {
            "env": self.envs,
            "transport": self.transports,
            "provider": self.providers,
            "rubric": self.rubrics,
            "command": self.commands,
        }[kind]

    def all(self) -> list[Registry]:
        return [self.registry(k) for k in KINDS]
