"""Typed registries that plugins fill through the catalogue hooks, one class per kind.

Entries hold lazy ``"module:Object"`` references: listing what is installed never imports a
plugin's heavy dependencies (a cloud SDK, a simulator). ``Entry.load()`` imports on first use and
checks that the object is of the kind it was registered as (see ``openenv.kinds``).

What each kind accepts (any other keyword is refused with this list):

* envs: ``register(name, "pkg.env:MyEnv", description=, manifest=, version=, tags=)``
* transports: ``register(name, server="pkg.server:T", client="pkg.client:C" | None, description=)``;
  the URL schemes a client speaks are declared once, as the connector's ``schemes`` ClassVar.
* providers, rubrics, commands: ``register(name, "pkg.mod:Obj", description=)``

Name rule: a name registered by two plugins belongs to neither. Looking it up raises
``NameConflictError`` naming both plugins and how to choose (disable one with
``OPENENV_DISABLE_PLUGINS``); the other names of both plugins keep working. Discovery order never
decides, so an installed name cannot be taken over silently. One plugin registering a name twice is
an error of that plugin.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from openenv import kinds
from openenv.errors import PluginError, UnknownNameError, did_you_mean

__all__ = [
    "KINDS",
    "Catalog",
    "CommandRegistry",
    "EnvEntry",
    "EnvRegistry",
    "Entry",
    "NameConflictError",
    "ProviderRegistry",
    "Registry",
    "RubricRegistry",
    "TransportEntry",
    "TransportRegistry",
    "load_ref",
]

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


def _ref_text(ref: Any) -> str:
    if isinstance(ref, str):
        return ref
    mod = getattr(ref, "__module__", "?")
    return f"{mod}:{getattr(ref, '__qualname__', type(ref).__qualname__)}"


class NameConflictError(PluginError):
    """A name is registered by more than one plugin, so it is served by none of them."""

    def __init__(self, kind: str, name: str, entries: Sequence[Entry]) -> None:
        # Sorted by plugin name: the message does not depend on discovery order either.
        self.kind, self.name = kind, name
        self.entries = sorted(entries, key=lambda e: e.plugin)
        owners = " and ".join(e.source for e in self.entries)
        switches = " or ".join(f"OPENENV_DISABLE_PLUGINS={e.plugin}" for e in self.entries)
        super().__init__(
            f"{kind} '{name}' is registered by {len(entries)} plugins: {owners}. OpenEnv never "
            f"picks one silently: disable the one you do not want ({switches}) or uninstall it."
        )


@dataclass
class Entry:
    """One registered thing: its kind, name, lazy reference and the plugin that registered it."""

    kind: str
    name: str
    ref: Any
    plugin: str
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: Distribution (and version) of the plugin, when it came from an installed package.
    dist: str | None = None
    _loaded: Any = field(default=None, repr=False, compare=False)

    @property
    def ref_text(self) -> str:
        return _ref_text(self.ref)

    @property
    def source(self) -> str:
        """``plugin 'x' (dist 1.0)``: who provides this entry, for messages."""
        return f"plugin '{self.plugin}'" + (f" ({self.dist})" if self.dist else "")

    def load(self) -> Any:
        """Import the referenced object, check it is of this entry's kind, and return it (cached)."""
        if self._loaded is None:
            obj = self._import(self.ref, self.ref_text)
            kinds.check(self.kind, obj, self.label, self.ref_text)
            self._loaded = obj
        return self._loaded

    @property
    def label(self) -> str:
        return f"{self.kind} '{self.name}' (from plugin '{self.plugin}')"

    def _import(self, ref: Any, text: str) -> Any:
        try:
            return load_ref(ref)
        except Exception as exc:
            raise PluginError(
                f"{self.label} could not be loaded from {text}: {type(exc).__name__}: {exc}. "
                "Reinstall the plugin or check its dependencies."
            ) from exc

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"name": self.name, "ref": self.ref_text, "plugin": self.plugin}
        if self.description:
            row["description"] = self.description
        if self.extra:
            # Extras never override the core keys (a ``plugin=`` extra must not hide attribution).
            row.update({k: v for k, v in self.extra.items() if _jsonable(v) and k not in row})
        return row


@dataclass
class EnvEntry(Entry):
    """An env: an ``Environment`` subclass (or zero-argument factory) and its manifest."""

    manifest: str | None = None
    version: str | None = None
    tags: tuple[str, ...] = ()


@dataclass
class TransportEntry(Entry):
    """A transport: ``ref`` is its ``ServerTransport``; ``client`` its ``ClientConnector`` or ``None``."""

    client: Any = None
    #: Optional ``"module:Class"`` of a tool-calling client (``openenv.core``'s ``MCPToolClient``
    #: adapts it, so the kernel never imports a transport package).
    tool_client: str | None = None
    _client_loaded: Any = field(default=None, repr=False, compare=False)

    @property
    def server(self) -> Any:
        return self.ref

    @property
    def client_text(self) -> str | None:
        return None if self.client is None else _ref_text(self.client)

    def load_client(self) -> Any:
        """The checked ``ClientConnector`` subclass, or ``None`` for a server-only transport."""
        if self.client is None:
            return None
        if self._client_loaded is None:
            text = self.client_text or ""
            obj = self._import(self.client, text)
            kinds.check_connector(obj, f"client of {self.label}", text)
            self._client_loaded = obj
        return self._client_loaded

    @property
    def schemes(self) -> tuple[str, ...]:
        """URL schemes of the client connector (imports it; ``()`` without a client)."""
        connector = self.load_client()
        return tuple(connector.schemes) if connector is not None else ()


class _ConnectorSchemes(Sequence[str]):
    """``entry.extra["schemes"]`` for callers of the untyped API: read from the connector on use."""

    def __init__(self, entry: TransportEntry) -> None:
        self._entry = entry

    def __getitem__(self, index: Any) -> Any:
        return self._entry.schemes[index]

    def __len__(self) -> int:
        return len(self._entry.schemes)

    def __repr__(self) -> str:
        return f"<schemes of {self._entry.client_text}>"


def _jsonable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool | type(None) | list | dict)


class Registry:
    """Registry of one kind. Plugins call ``register``; the kernel looks names up.

    The base accepts ``register(name, ref, description=)`` (providers, rubrics, commands).
    """

    kind: str

    def __init__(self, kind: str | None = None) -> None:
        kind = kind or getattr(type(self), "kind", None)
        if kind not in KINDS:
            raise ValueError(f"Unknown registry kind {kind!r}: expected one of {', '.join(KINDS)}")
        self.kind = kind
        self._entries: dict[str, Entry] = {}
        self._conflicts: dict[str, list[Entry]] = {}
        #: Set by the plugin manager while a plugin's catalogue hook runs, for attribution.
        self.current_plugin: str = "<direct>"
        self.current_dist: str | None = None

    #: Keywords ``register`` accepts, for the message that refuses any other.
    accepted: ClassVar[tuple[str, ...]] = ("name", "ref", "description")

    def register(self, name: str, ref: Any, *, description: str = "", **unknown: Any) -> Entry:
        """Register ``name`` → ``ref`` (``"module:Object"`` preferred: it stays lazy)."""
        self._refuse_unknown(name, unknown)
        return self._add(Entry(self.kind, name, ref, self.current_plugin, description,
                               dist=self.current_dist))

    # -- shared by every kind ---------------------------------------------------------------------

    def _refuse_unknown(self, name: str, unknown: dict[str, Any], hints: dict[str, str] | None = None) -> None:
        if not unknown:
            return
        key = sorted(unknown)[0]
        hint = (hints or {}).get(key) or did_you_mean(key, self.accepted)
        raise PluginError(
            f"{self.kind} '{name}' (plugin '{self.current_plugin}'): register() got the unknown "
            f"keyword '{key}'.{(' ' + hint.strip()) if hint else ''} {self.kind.title()} "
            f"registrations accept: {', '.join(self.accepted)}."
        )

    def _add(self, entry: Entry) -> Entry:
        name = entry.name
        if not isinstance(name, str) or not name:
            raise PluginError(f"{self.kind} names must be non-empty strings, got {name!r}")
        holders = self._conflicts.get(name) or ([self._entries[name]] if name in self._entries else [])
        if any(h.plugin == entry.plugin for h in holders):
            raise PluginError(
                f"Duplicate {self.kind} '{name}': registered twice by plugin '{entry.plugin}'. "
                "Register each name once."
            )
        if holders:
            self._entries.pop(name, None)
            self._conflicts[name] = [*holders, entry]
        else:
            self._entries[name] = entry
        return entry

    def drop_plugin(self, plugin: str) -> None:
        """Forget every entry of ``plugin`` (it failed); a conflict it was part of may resolve."""
        for name in [n for n, e in self._entries.items() if e.plugin == plugin]:
            del self._entries[name]
        for name, holders in list(self._conflicts.items()):
            left = [h for h in holders if h.plugin != plugin]
            if len(left) == len(holders):
                continue
            del self._conflicts[name]
            if len(left) == 1:
                self._entries[name] = left[0]
            elif left:
                self._conflicts[name] = left

    def conflicts(self) -> dict[str, list[Entry]]:
        """Names registered by more than one plugin, with every contender (in registration order)."""
        return {name: list(holders) for name, holders in sorted(self._conflicts.items())}

    def get(self, name: str) -> Entry:
        try:
            return self._entries[name]
        except KeyError:
            if name in self._conflicts:
                raise NameConflictError(self.kind, name, self._conflicts[name]) from None
            raise UnknownNameError(self.kind, name, self._entries) from None

    def load(self, name: str) -> Any:
        return self.get(name).load()

    def names(self) -> list[str]:
        """Usable names (a conflicted name is not usable: see ``conflicts``)."""
        return sorted(self._entries)

    def by_plugin(self, plugin: str) -> list[Entry]:
        every = [*self._entries.values(), *(e for hs in self._conflicts.values() for e in hs)]
        return [e for e in every if e.plugin == plugin]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def __len__(self) -> int:
        return len(self._entries)


class EnvRegistry(Registry):
    """``registry.register("echo", "pkg.env:EchoEnv", description=..., manifest=...)``."""

    kind = "env"
    accepted = ("name", "ref", "description", "manifest", "version", "tags")

    def __iter__(self) -> Iterator[EnvEntry]:
        return super().__iter__()  # type: ignore[return-value]

    def get(self, name: str) -> EnvEntry:
        return super().get(name)  # type: ignore[return-value]

    def register(  # type: ignore[override]
        self,
        name: str,
        ref: Any,
        *,
        description: str = "",
        manifest: str | None = None,
        version: str | None = None,
        tags: Sequence[str] = (),
        **unknown: Any,
    ) -> EnvEntry:
        """Register an env; ``manifest`` locates its ``openenv.yaml`` (read without importing it)."""
        self._refuse_unknown(name, unknown)
        if isinstance(tags, str):
            raise PluginError(f"env '{name}' (plugin '{self.current_plugin}'): tags= must be a "
                              f"list of strings, got the string {tags!r}; write tags=[{tags!r}].")
        extra: dict[str, Any] = {k: v for k, v in (("manifest", manifest), ("version", version))
                                 if v is not None}
        if tags:
            extra["tags"] = list(tags)
        entry = EnvEntry(self.kind, name, ref, self.current_plugin, description, extra,
                         dist=self.current_dist, manifest=manifest, version=version,
                         tags=tuple(tags))
        self._add(entry)
        return entry


class TransportRegistry(Registry):
    """``registry.register("ws", server="pkg.server:T", client="pkg.client:C", description=...)``."""

    kind = "transport"
    accepted = ("name", "server", "client", "tool_client", "description")

    def __iter__(self) -> Iterator[TransportEntry]:
        return super().__iter__()  # type: ignore[return-value]

    def get(self, name: str) -> TransportEntry:
        return super().get(name)  # type: ignore[return-value]

    def register(  # type: ignore[override]
        self,
        name: str,
        server: Any = None,
        *,
        client: Any = None,
        tool_client: str | None = None,
        description: str = "",
        **unknown: Any,
    ) -> TransportEntry:
        """Register a transport's server side and (optionally) its client connector."""
        self._refuse_unknown(name, unknown, hints={
            "schemes": "URL schemes are declared once, as the client connector's `schemes` "
                       "ClassVar (e.g. schemes = (\"ws\", \"wss\")): drop schemes= from register().",
            "ref": "Pass the server side as server=\"pkg.server:MyTransport\".",
        })
        if server is None:
            raise PluginError(f"transport '{name}' (plugin '{self.current_plugin}'): register() "
                              "needs server=\"pkg.server:MyTransport\" (a ServerTransport subclass).")
        entry = TransportEntry(self.kind, name, server, self.current_plugin, description,
                               dist=self.current_dist, client=client, tool_client=tool_client)
        if client is not None:
            entry.extra = {"client": entry.client_text, "schemes": _ConnectorSchemes(entry)}
        self._add(entry)
        return entry


class ProviderRegistry(Registry):
    """``registry.register("docker", "pkg.provider:DockerProvider", description=...)``."""

    kind = "provider"


class RubricRegistry(Registry):
    """``registry.register("exact", "pkg.rubrics:ExactMatch", description=...)``."""

    kind = "rubric"


class CommandRegistry(Registry):
    """``registry.register("build", "pkg.cli:app", description=...)`` (a Typer app or a function)."""

    kind = "command"


class Catalog:
    """All registries together: ``catalog.envs``, ``.transports``, ``.providers``, ``.rubrics``, ``.commands``."""

    def __init__(self) -> None:
        self.envs = EnvRegistry()
        self.transports = TransportRegistry()
        self.providers = ProviderRegistry()
        self.rubrics = RubricRegistry()
        self.commands = CommandRegistry()

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
