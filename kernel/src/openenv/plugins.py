"""The plugin manager: discovers, loads and isolates plugins.

Each entry point of group ``openenv`` is loaded on its own. A plugin that fails to import, names a
hook that does not exist, or raises inside a catalogue hook is recorded with its error and skipped:
the CLI keeps working and ``openenv plugins list`` shows what went wrong. In strict mode (tests,
CI: ``OPENENV_STRICT_PLUGINS=1``) the same failures raise ``PluginError``.

Switches: ``OPENENV_DISABLE_PLUGINS=a,b`` skips those plugins; ``OPENENV_LOAD_PLUGINS=a,b`` loads
only those (built-ins always load).

Hook order is pluggy's (``tryfirst`` first, ``trylast`` last, otherwise the plugin registered last
runs first), also for the catalogue and lifecycle hooks the manager calls one implementation at a
time. A hook wrapper on those hooks is refused at load (it could never run); on decision hooks it
works as pluggy documents.

Names: a name registered by two plugins is served by neither (``openenv.registry``): both plugins
get status ``conflict`` with a message naming them and the way out, the rest of each keeps
working, and strict mode raises (``choose_provider`` raises it for a contested provider too).
``served_by`` gives the one line ``serve``/``run`` print.
"""

from __future__ import annotations

import importlib.metadata as md
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from openenv import hookspecs
from openenv.errors import PluginError, did_you_mean
from openenv.events import EVENT_TYPES, LifecycleEvent, event_for
from openenv.registry import KINDS, Catalog, Entry, NameConflictError, load_ref

__all__ = [
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "PluginManager",
    "get_plugin_manager",
    "reset_plugin_manager",
]

log = logging.getLogger("openenv.plugins")

ENTRY_POINT_GROUP = "openenv"
BUILTIN_NAME = "openenv"
#: The kernel's distribution name (its import name is `openenv`; the distribution `openenv` on the
#: public index is upstream OpenEnv, a different package).
KERNEL_DIST = "openenvkit"

_CATALOGUE_HOOKS = {
    "env": "openenv_register_envs",
    "transport": "openenv_register_transports",
    "provider": "openenv_register_providers",
    "rubric": "openenv_register_rubrics",
    "command": "openenv_register_commands",
}
#: Hooks whose implementations the manager calls one at a time (so wrappers cannot take part).
_ONE_BY_ONE = frozenset(_CATALOGUE_HOOKS.values()) | frozenset(EVENT_TYPES)


def _env_list(name: str) -> set[str] | None:
    raw = os.environ.get(name)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _strict_from_env() -> bool:
    return os.environ.get("OPENENV_STRICT_PLUGINS", "").lower() in {"1", "true", "yes"}


@dataclass
class PluginInfo:
    """What ``openenv plugins list`` shows for one plugin."""

    name: str
    dist: str | None = None
    version: str | None = None
    module: str | None = None
    status: str = "ok"  # ok | error | disabled | conflict
    error: str | None = None
    builtin: bool = False
    hooks: list[str] = field(default_factory=list)
    provides: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dist": self.dist,
            "version": self.version,
            "module": self.module,
            "kinds": sorted(k for k, names in self.provides.items() if names),
            "provides": {k: sorted(v) for k, v in self.provides.items() if v},
            "hooks": sorted(self.hooks),
            "status": self.status,
            "error": self.error,
            "builtin": self.builtin,
        }

    @property
    def source(self) -> str:
        """``plugin 'x' (dist 1.0)`` for messages."""
        dist = " ".join(p for p in (self.dist, self.version) if p)
        return f"plugin '{self.name}'" + (f" ({dist})" if dist else "")


class PluginManager:
    """Loads plugins and builds the catalogue. Build a fresh one in tests (never the global)."""

    def __init__(
        self,
        *,
        strict: bool | None = None,
        entry_points: Iterable[Any] | None = None,
        builtins: bool = True,
    ) -> None:
        self.strict = _strict_from_env() if strict is None else strict
        self.pm = pluggy.PluginManager("openenv")
        self.pm.add_hookspecs(hookspecs)
        self._spec_names = frozenset(
            name for name in dir(hookspecs) if self.pm.parse_hookspec_opts(hookspecs, name)
        )
        self.infos: dict[str, PluginInfo] = {}
        self._catalog: Catalog | None = None
        self._lock = threading.Lock()
        if builtins:
            from openenv import builtins as builtin_plugin

            self._register(BUILTIN_NAME, builtin_plugin, PluginInfo(
                name=BUILTIN_NAME, dist=KERNEL_DIST, version=_dist_version(KERNEL_DIST),
                module=builtin_plugin.__name__, builtin=True,
            ))
        eps = entry_points if entry_points is not None else md.entry_points(group=ENTRY_POINT_GROUP)
        for ep in eps:
            self.load_entry_point(ep)

    @property
    def hook(self) -> Any:
        return self.pm.hook

    # -- loading ----------------------------------------------------------------------------------

    def load_entry_point(self, ep: Any) -> PluginInfo:
        """Load one entry point, recording (or in strict mode raising) any failure."""
        dist = getattr(ep, "dist", None)
        info = PluginInfo(
            name=ep.name,
            dist=getattr(dist, "name", None) if dist is not None else None,
            version=getattr(dist, "version", None) if dist is not None else None,
            module=ep.value,
        )
        if ep.name in self.infos:
            other = self.infos[ep.name]
            # Recorded under its own key so `plugins list` shows both, not just the first.
            return self._fail(info, f"Duplicate plugin name '{ep.name}': also provided by "
                              f"{other.dist or other.module}. Uninstall one of them.",
                              key=f"{ep.name} ({info.dist or info.module})")
        disabled, only = _env_list("OPENENV_DISABLE_PLUGINS"), _env_list("OPENENV_LOAD_PLUGINS")
        if (disabled and ep.name in disabled) or (only is not None and ep.name not in only):
            info.status = "disabled"
            self.infos[ep.name] = info
            return info
        try:
            plugin = ep.load()
        except Exception as exc:
            return self._fail(info, f"import failed: {type(exc).__name__}: {exc}", exc)
        return self._register(ep.name, plugin, info)

    def register(self, plugin: Any, name: str | None = None) -> PluginInfo:
        """Register a plugin object directly (tests, embedding)."""
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        return self._register(name, plugin, PluginInfo(name=name, module=getattr(plugin, "__name__", None)))

    def _register(self, name: str, plugin: Any, info: PluginInfo) -> PluginInfo:
        problem = self._check_hook_names(plugin)
        if problem:
            return self._fail(info, problem)
        try:
            self.pm.register(plugin, name=name)
            self.pm.check_pending()
            problem = self._check_wrappers(plugin)
        except Exception as exc:
            self._unregister(plugin)
            return self._fail(info, f"invalid plugin: {exc}", exc)
        if problem:
            self._unregister(plugin)
            return self._fail(info, problem)
        info.hooks = sorted(impl.name for impl in (self.pm.get_hookcallers(plugin) or []))
        self.infos[name] = info
        self._catalog = None
        return info

    def _unregister(self, plugin: Any) -> None:
        try:
            self.pm.unregister(plugin)
        except Exception:
            pass

    def _check_wrappers(self, plugin: Any) -> str | None:
        """Refuse hook wrappers on the hooks the manager calls one implementation at a time."""
        bad = sorted(caller.name for caller in (self.pm.get_hookcallers(plugin) or [])
                     if caller.name in _ONE_BY_ONE
                     for impl in caller.get_hookimpls()
                     if impl.plugin is plugin and (impl.wrapper or impl.hookwrapper))
        if not bad:
            return None
        return (f"'{bad[0]}' is a hook wrapper (wrapper=True / hookwrapper=True). OpenEnv calls "
                "catalogue and lifecycle hooks one implementation at a time, so a wrapper there "
                "would never run: drop the wrapper option (order with tryfirst/trylast instead). "
                "Wrappers work on decision hooks such as openenv_choose_provider.")

    def _check_hook_names(self, plugin: Any) -> str | None:
        """Explain hook-looking attributes pluggy would reject or silently ignore, or ``None``.

        pluggy reports a misspelled ``@hookimpl`` only as "unknown hook", and silently skips a
        correctly named function that lacks the decorator; both are plugin-author mistakes that
        deserve a message naming the fix.
        """
        known = sorted(h for h in self._spec_names)
        problems: list[str] = []
        for attr in dir(plugin):
            opts = self.pm.parse_hookimpl_opts(plugin, attr)
            marked = opts is not None
            if not (marked or attr.startswith("openenv_")):
                continue
            hook = (opts.get("specname") if opts else None) or attr
            if hook not in self._spec_names:
                if marked or callable(getattr(plugin, attr, None)):
                    problems.append(f"unknown hook '{hook}'.{did_you_mean(hook, known)}")
            elif not marked and callable(getattr(plugin, attr, None)):
                problems.append(f"'{attr}' is not decorated with @openenv.hookimpl, so it would "
                                "never be called")
        return "; ".join(problems) or None

    def _fail(
        self,
        info: PluginInfo,
        message: str,
        exc: BaseException | None = None,
        *,
        key: str | None = None,
    ) -> PluginInfo:
        info.status, info.error = "error", message
        self.infos.setdefault(key or info.name, info)
        if self.strict:
            # The exception carries the message; logging it too would print it twice.
            raise PluginError(f"Plugin '{info.name}' failed: {message}") from exc
        log.warning("plugin %s skipped: %s", info.name, message)
        return info

    # -- the catalogue ----------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """Registries filled by every loaded plugin's catalogue hooks (built once, then cached)."""
        with self._lock:
            if self._catalog is None:
                self._catalog = self._build_catalog()
            return self._catalog

    def _build_catalog(self) -> Catalog:
        catalog = Catalog()
        # The catalogue is rebuilt after every late registration: start "provides" (and conflicts,
        # which depend on who is loaded) afresh so nothing is listed twice.
        for known in self.infos.values():
            known.provides = {}
            if known.status == "conflict":
                known.status, known.error = "ok", None
        for kind in KINDS:
            registry = catalog.registry(kind)
            caller = getattr(self.pm.hook, _CATALOGUE_HOOKS[kind])
            # Call implementations one by one, in pluggy's order, so each entry is attributed to
            # its plugin and one failing plugin cannot hide the others.
            for impl in self._call_order(caller):
                name = self.pm.get_name(impl.plugin) or "?"
                info = self.infos.get(name)
                if info is not None and info.status != "ok":
                    continue
                registry.current_plugin = name
                registry.current_dist = _dist_text(info)
                try:
                    # pluggy lets an implementation name a subset of the spec's arguments.
                    impl.function(*[{"registry": registry}[arg] for arg in impl.argnames])
                except Exception as exc:
                    # A failed plugin contributes nothing, also from hooks that already ran.
                    for other in catalog.all():
                        other.drop_plugin(name)
                    if info is not None:
                        self._fail(info, f"{caller.name} raised {type(exc).__name__}: {exc}", exc)
            registry.current_plugin, registry.current_dist = "<direct>", None
        for registry in catalog.all():
            for entry in registry:
                self._provides(entry)
            for holders in registry.conflicts().values():
                conflict = NameConflictError(registry.kind, holders[0].name, holders)
                for entry in holders:
                    self._provides(entry)
                    self._conflict(entry.plugin, conflict)
        return catalog

    def _provides(self, entry: Entry) -> None:
        info = self.infos.get(entry.plugin)
        if info is not None:
            info.provides.setdefault(entry.kind, []).append(entry.name)

    def _conflict(self, plugin: str, conflict: NameConflictError) -> None:
        if self.strict:
            raise conflict
        info = self.infos.get(plugin)
        if info is None:
            return
        info.status = "conflict"
        info.error = f"{info.error}; {conflict}" if info.error else str(conflict)
        log.warning("%s", conflict)

    @staticmethod
    def _call_order(caller: Any) -> list[Any]:
        """Non-wrapper implementations in the order pluggy would call them."""
        return [impl for impl in reversed(caller.get_hookimpls())
                if not (impl.wrapper or impl.hookwrapper)]

    def served_by_news(self, kind: str, name: str) -> str | None:
        """``served_by``'s line when it tells the user something: ``name`` is served by a plugin from
        outside OpenEnv's own distributions (``openenvkit-*``), e.g. one that registered a name they
        did not expect; ``None`` for OpenEnv's own (printing those before every command is noise)."""
        entry = self.catalog.registry(kind).get(name)
        info = self.infos.get(entry.plugin)
        if info is not None and (info.builtin or (info.dist or "").lower().startswith("openenvkit")):
            return None
        return self.served_by(kind, name)

    def served_by(self, kind: str, name: str) -> str:
        """One line naming the plugin and distribution that serve ``name`` (looked up as ``get``)."""
        entry = self.catalog.registry(kind).get(name)
        info = self.infos.get(entry.plugin)
        source = info.source if info is not None else entry.source
        return f"{kind} '{name}' is served by {source}: {entry.ref_text}"

    def plugins(self, *, include_builtins: bool = False) -> list[PluginInfo]:
        """Every known plugin (loaded, failed or disabled), after building the catalogue."""
        self.catalog  # noqa: B018 - fills "provides"
        return [i for i in self.infos.values() if include_builtins or not i.builtin]

    def upstream_name(self, module: str, name: str) -> Any:
        """What a plugin provides as ``name`` of upstream's ``module`` (``openenv_upstream_names``),
        loaded from the reference it gave; ``None`` when no installed plugin provides it."""
        for answer in self.hook.openenv_upstream_names(module=module):
            if answer and name in answer:
                try:
                    return load_ref(answer[name])
                except (ImportError, AttributeError) as exc:
                    raise PluginError(f"{module}.{name} is provided by a plugin as {answer[name]!r}, which "
                                      f"does not load: {exc}. Reinstall the plugin that registers it.") from exc
        return None

    def choose_provider(self, env: str, requested: str | None) -> str:
        """Ask the decision hook which provider should launch ``env``; always an installed one.

        Raises ``UnknownNameError`` (closest name, package to install) when the answer is not an
        installed provider, naming the plugin when a plugin gave it, and ``NameConflictError``
        (naming both plugins and the way out) when it is a name two plugins register: such a name
        is served by neither, as for envs.
        """
        from openenv.builtins import DEFAULT_PROVIDER, unavailable_provider
        from openenv.errors import UnknownNameError

        providers = self.catalog.providers
        if requested is not None:
            self._refuse_contested(requested)
        available = providers.names()
        try:
            chosen = self.pm.hook.openenv_choose_provider(env=env, requested=requested, available=available)
        except UnknownNameError as exc:  # the fallback refusing a contested default
            self._refuse_contested(exc.name)
            raise
        if chosen is None:
            # Without the built-in plugin nobody may answer: apply the documented fallback here too.
            chosen = requested or DEFAULT_PROVIDER
            if chosen not in available:
                self._refuse_contested(chosen)
                raise unavailable_provider(chosen, available)
        chosen = str(chosen)
        if chosen not in available:
            self._refuse_contested(chosen)
            who = ", ".join(self.pm.get_name(i.plugin) or "?" for i in
                            self._call_order(self.pm.hook.openenv_choose_provider))
            raise unavailable_provider(chosen, available, why=(
                f"A plugin's openenv_choose_provider (implemented by: {who}) chose it for env "
                f"'{env}', but it is not installed."))
        return chosen

    def _refuse_contested(self, provider: str) -> None:
        holders = self.catalog.providers.conflicts().get(provider)
        if holders:
            raise NameConflictError("provider", provider, holders)

    def notify(self, hook_name: str, event: LifecycleEvent | dict[str, Any]) -> None:
        """Call a lifecycle hook with its typed event; observer errors are logged, never propagated.

        ``event`` is the hook's event type (``openenv.events``); a dict of its fields is accepted
        from callers of the untyped API. Each observer is called on its own, in pluggy's order, so
        one raising does not silence the others (pluggy would stop at the first exception).
        """
        typed = event_for(hook_name, event)
        caller = getattr(self.pm.hook, hook_name)
        for impl in self._call_order(caller):
            try:
                impl.function(*[{"event": typed}[arg] for arg in impl.argnames])
            except Exception:
                log.exception("lifecycle hook %s of plugin %s raised", hook_name,
                              self.pm.get_name(impl.plugin))


def _dist_text(info: PluginInfo | None) -> str | None:
    if info is None or not info.dist:
        return None
    return " ".join(p for p in (info.dist, info.version) if p)


def _dist_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


_GLOBAL: PluginManager | None = None
_GLOBAL_LOCK = threading.Lock()


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager (created on first use from installed entry points)."""
    global _GLOBAL
    with _GLOBAL_LOCK:
        if _GLOBAL is None:
            _GLOBAL = PluginManager()
        return _GLOBAL


def reset_plugin_manager(pm: PluginManager | None = None) -> None:
    """Replace (or drop) the process-wide plugin manager. For tests and embedding."""
    global _GLOBAL
    with _GLOBAL_LOCK:
        _GLOBAL = pm
