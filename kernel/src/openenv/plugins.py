"""The plugin manager: discovers, loads and isolates plugins.

Each entry point of group ``openenv`` is loaded on its own. A plugin that fails to import, names a
hook that does not exist, or raises inside a catalogue hook is recorded with its error and skipped:
the CLI keeps working and ``openenv plugins list`` shows what went wrong. In strict mode (tests,
CI: ``OPENENV_STRICT_PLUGINS=1``) the same failures raise ``PluginError``.

Switches: ``OPENENV_DISABLE_PLUGINS=a,b`` skips those plugins; ``OPENENV_LOAD_PLUGINS=a,b`` loads
only those (built-ins always load).
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
from openenv.registry import KINDS, Catalog

__all__ = ["ENTRY_POINT_GROUP", "PluginInfo", "PluginManager", "get_plugin_manager", "reset_plugin_manager"]

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
    status: str = "ok"  # ok | error | disabled
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
        except Exception as exc:
            try:
                self.pm.unregister(plugin)
            except Exception:
                pass
            return self._fail(info, f"invalid plugin: {exc}", exc)
        info.hooks = sorted(impl.name for impl in (self.pm.get_hookcallers(plugin) or []))
        self.infos[name] = info
        self._catalog = None
        return info

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
        # The catalogue is rebuilt after every late registration: start "provides" afresh so
        # names are not listed twice.
        for known in self.infos.values():
            known.provides = {}
        for kind in KINDS:
            registry = catalog.registry(kind)
            caller = getattr(self.pm.hook, _CATALOGUE_HOOKS[kind])
            # Call implementations one by one so each entry is attributed to its plugin and one
            # failing plugin cannot hide the others. Registration order (built-ins, then entry
            # points as discovered): on a duplicate name the first-discovered plugin keeps it.
            for impl in caller.get_hookimpls():
                name = self.pm.get_name(impl.plugin) or "?"
                info = self.infos.get(name)
                if info is not None and info.status != "ok":
                    continue
                registry.current_plugin = name
                try:
                    # pluggy lets an implementation name a subset of the spec's arguments.
                    impl.function(*[{"registry": registry}[arg] for arg in impl.argnames])
                except Exception as exc:
                    # A failed plugin contributes nothing, also from hooks that already ran.
                    for other in catalog.all():
                        for entry in other.by_plugin(name):
                            other._entries.pop(entry.name, None)
                    if info is not None:
                        self._fail(info, f"{caller.name} raised {type(exc).__name__}: {exc}", exc)
            registry.current_plugin = "<direct>"
        for registry in catalog.all():
            for entry in registry:
                info = self.infos.get(entry.plugin)
                if info is not None:
                    info.provides.setdefault(registry.kind, []).append(entry.name)
        return catalog

    def plugins(self, *, include_builtins: bool = False) -> list[PluginInfo]:
        """Every known plugin (loaded, failed or disabled), after building the catalogue."""
        self.catalog  # noqa: B018 - fills "provides"
        return [i for i in self.infos.values() if include_builtins or not i.builtin]

    def choose_provider(self, env: str, requested: str | None) -> str:
        """Ask the decision hook which provider should launch ``env``."""
        available = self.catalog.providers.names()
        chosen = self.pm.hook.openenv_choose_provider(env=env, requested=requested, available=available)
        # Without the built-in plugin nobody may answer: apply the documented fallback here too.
        return str(chosen) if chosen is not None else (requested or "local")

    def notify(self, hook_name: str, info: dict[str, Any]) -> None:
        """Call a lifecycle hook; observer errors are logged, never propagated.

        Each observer is called on its own so that one raising does not silence the others
        (pluggy would stop at the first exception).
        """
        caller = getattr(self.pm.hook, hook_name)
        for impl in reversed(caller.get_hookimpls()):
            try:
                impl.function(*[{"info": info}[arg] for arg in impl.argnames])
            except Exception:
                log.exception("lifecycle hook %s of plugin %s raised", hook_name,
                              self.pm.get_name(impl.plugin))


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
