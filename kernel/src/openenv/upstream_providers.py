"""Upstream ``ContainerProvider`` subclasses as our providers (``openenv providers list``, ``--provider``).

``adapted_provider(name, ref)`` makes a ``Provider`` class for an upstream provider class named by
a lazy ``"module:Class"`` reference: nothing of the third-party package is imported until a server
is started, so ``openenv providers list`` never imports a cloud SDK. ``start`` builds the upstream
provider, calls ``start_container(image, env_vars=...)`` and ``wait_for_ready``; the handle's
``stop`` calls ``stop_container`` and ``close``. A package that fails to import, or raises while
starting, is one ``PluginError`` line naming the package and the way out; other providers are
unaffected.

Which upstream providers are registered (``upstream_provider_refs``):

* installed distributions that depend on upstream's ``openenv`` (or ``openenv-core``)
  distribution and declare no ``openenv`` entry points of ours: each ``*Provider`` name in their
  top-level package's ``__all__`` (read from the source, not imported), under the distribution's
  name without its ``openenv-`` prefix (``openenv-sprites`` → ``sprites``);
* ``OPENENV_UPSTREAM_PROVIDERS="name=module:Class,..."``, for a provider class that is not an
  installed distribution of its own.

The upstream class is built with no arguments unless ``OPENENV_UPSTREAM_PROVIDER_KWARGS`` holds a
JSON object ``{"<provider name>": {<constructor keyword arguments>}}`` (e.g.
``{"sprites": {"api_base_url": "https://..."}}``): ``openenv run --provider sprites`` has no flag
for a third-party class's own options, and upstream's classes read the rest (tokens) from their
own environment variables. The reserved key ``"images"`` maps env names to what the class takes
as an image (``{"images": {"echo": "https://github.com/me/echo_env"}}`` for Sprites, which
starts git sources); without an entry the env name is the image.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import threading
from importlib import metadata as md
from typing import Any, ClassVar

from openenv.errors import PluginError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle

__all__ = ["UPSTREAM_PROVIDERS_ENV", "UPSTREAM_PROVIDER_KWARGS_ENV", "UpstreamProviderAdapter",
           "UpstreamProviderHandle", "adapted_provider", "upstream_provider_refs"]

UPSTREAM_PROVIDERS_ENV = "OPENENV_UPSTREAM_PROVIDERS"
UPSTREAM_PROVIDER_KWARGS_ENV = "OPENENV_UPSTREAM_PROVIDER_KWARGS"
#: Upstream's distributions: a package depending on one of these was written for upstream.
_UPSTREAM_DISTS = {"openenv", "openenv-core"}
_ids = itertools.count(1)


class UpstreamProviderHandle(ProviderHandle):
    """A server started by an upstream provider; ``stop`` stops its container and closes the provider."""

    def __init__(self, *, provider: str, id: str, base_url: str, upstream: Any, owner: str) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url)
        self.upstream, self.owner = upstream, owner
        self._stopped = False
        self._lock = threading.Lock()

    def wait_ready(self, timeout_s: float) -> None:
        self.upstream.wait_for_ready(self.base_url, timeout_s=timeout_s)

    def is_running(self) -> bool:
        # Upstream's contract has no liveness query: a started, not yet stopped container is "running".
        return not self._stopped

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            self.upstream.stop_container()
        finally:
            close = getattr(self.upstream, "close", None)
            if callable(close):
                close()


class UpstreamProviderAdapter(Provider):
    """Our ``Provider`` over an upstream ``ContainerProvider`` class (set ``upstream_ref`` in a subclass)."""

    upstream_ref: ClassVar[str] = ""
    #: The distribution the upstream class comes from, for error messages.
    dist: ClassVar[str | None] = None
    requires: ClassVar[str] = "the third-party provider's own service (credentials, an API endpoint)"

    def __init__(self, **upstream_kwargs: Any) -> None:
        self.upstream_kwargs = upstream_kwargs
        self._started: list[UpstreamProviderHandle] = []

    def _package(self) -> str:
        return self.dist or self.upstream_ref.partition(":")[0]

    def upstream_class(self) -> type:
        """Import the upstream provider class (a ``PluginError`` naming the package when that fails)."""
        from openenv.core.containers.runtime import ContainerProvider
        from openenv.registry import load_ref

        try:
            cls = load_ref(self.upstream_ref)
        except Exception as exc:
            raise PluginError(
                f"provider '{self.name}': the package {self._package()} failed to import "
                f"({type(exc).__name__}: {exc}). Reinstall it with its dependencies, or uninstall it; "
                "other providers are unaffected.") from exc
        if not (isinstance(cls, type) and issubclass(cls, ContainerProvider)):
            raise PluginError(f"provider '{self.name}': {self.upstream_ref} is not a ContainerProvider subclass "
                              f"(got {cls!r}). Point it at the package's provider class.")
        return cls

    def configured_kwargs(self) -> dict[str, Any]:
        """This provider's constructor keyword arguments from ``OPENENV_UPSTREAM_PROVIDER_KWARGS``."""
        raw = os.environ.get(UPSTREAM_PROVIDER_KWARGS_ENV, "").strip()
        if not raw:
            return {}
        try:
            table = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise PluginError(f"{UPSTREAM_PROVIDER_KWARGS_ENV} is not JSON ({exc}). Set it to an object like "
                              f'{{"{self.name}": {{"api_base_url": "https://..."}}}}.') from exc
        kwargs = table.get(self.name, {}) if isinstance(table, dict) else None
        if not isinstance(kwargs, dict):
            raise PluginError(f"{UPSTREAM_PROVIDER_KWARGS_ENV}: the entry for '{self.name}' must be a JSON object "
                              f"of constructor keyword arguments, got {kwargs!r}.")
        return kwargs

    def start(self, spec: LaunchSpec) -> ProviderHandle:
        cls = self.upstream_class()
        options = {**self.upstream_kwargs, **spec.options}
        configured = self.configured_kwargs()
        # "images" maps env names to what the class takes as an image (Sprites: a git URL).
        images = configured.pop("images", {})
        init_kwargs = {**configured, **options.pop("provider_kwargs", {})}
        image = spec.image or (images.get(spec.env) if isinstance(images, dict) else None) or spec.env
        try:
            upstream = cls(**init_kwargs)
        except Exception as exc:  # e.g. a missing token: the class checks its configuration when built
            raise RuntimeError(
                f"provider '{self.name}' ({self._package()}) could not be configured: {type(exc).__name__}: {exc}. "
                f"Set what it names (its environment variables, or constructor options in "
                f"{UPSTREAM_PROVIDER_KWARGS_ENV}), or choose another provider with --provider.") from exc
        try:
            base_url = upstream.start_container(image, env_vars=dict(spec.env_vars) or None, **options)
            handle = UpstreamProviderHandle(provider=self.name, id=f"{self.name}-{os.getpid()}-{next(_ids)}",
                                            base_url=str(base_url).rstrip("/"), upstream=upstream,
                                            owner=str(os.getpid()))
            handle.wait_ready(spec.startup_timeout_s)
        except Exception as exc:
            try:
                upstream.stop_container()
            except Exception:  # the start failure is the one to report; cleanup is best effort
                pass
            raise RuntimeError(
                f"provider '{self.name}' ({self._package()}) failed to start {image!r}: "
                f"{type(exc).__name__}: {exc}. Check the provider's configuration (credentials, endpoint), "
                "or choose another provider with --provider (`openenv providers list`).") from exc
        self._started.append(handle)
        return handle

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        # Upstream providers keep no registry of what they started: only this process's handles are known.
        return [HandleInfo(provider=self.name, id=h.id, owner=h.owner, base_url=h.base_url, status="running",
                           env=None) for h in self._started if not h._stopped]

    def gc(self) -> list[HandleInfo]:
        return []


def adapted_provider(name: str, ref: str, dist: str | None = None, description: str = "") -> type[Provider]:
    """A ``Provider`` subclass named ``name`` that drives the upstream provider class at ``ref`` (lazily)."""
    cls_name = re.sub(r"\W", "_", f"Upstream_{name}_Provider")
    return type(cls_name, (UpstreamProviderAdapter,), {
        "name": name, "upstream_ref": ref, "dist": dist, "__module__": __name__,
        "__doc__": description or f"Upstream provider {ref} (from {dist or 'configuration'}), adapted."})


def upstream_provider_refs() -> list[tuple[str, str, str | None]]:
    """``(name, "module:Class", distribution)`` for every upstream provider found (see the module)."""
    found: list[tuple[str, str, str | None]] = []
    for item in filter(None, (part.strip() for part in os.environ.get(UPSTREAM_PROVIDERS_ENV, "").split(","))):
        name, sep, ref = item.partition("=")
        if not sep or ":" not in ref:
            raise PluginError(f"{UPSTREAM_PROVIDERS_ENV}: {item!r} is not name=module:Class "
                              "(e.g. sprites=openenv_sprites:SpritesProvider).")
        found.append((name.strip(), ref.strip(), None))
    seen: set[str] = set()
    for dist in md.distributions():
        dist_name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if not dist_name or dist_name in seen or dist_name in _UPSTREAM_DISTS:
            continue
        seen.add(dist_name)
        if not any(_requirement_name(req) in _UPSTREAM_DISTS for req in dist.requires or ()):
            continue
        if any(ep.group == "openenv" for ep in dist.entry_points):
            continue  # a plugin of ours: it registers itself
        classes = [(pkg, cls) for pkg in _top_level_packages(dist) for cls in _exported_providers(dist, pkg)]
        short = dist_name.removeprefix("openenv-")
        for pkg, cls in classes:
            name = short if len(classes) == 1 else f"{short}-{cls.removesuffix('Provider').lower()}"
            found.append((name, f"{pkg}:{cls}", dist.metadata["Name"]))
    return found


def _requirement_name(req: str) -> str:
    if ";" in req and "extra" in req.split(";", 1)[1]:
        return ""  # an optional extra does not make the package upstream's
    return re.split(r"[\s<>=!~\[;(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _top_level_packages(dist: Any) -> list[str]:
    text = dist.read_text("top_level.txt")
    if text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    return sorted({str(f).split("/", 1)[0] for f in dist.files or () if str(f).endswith("/__init__.py")
                   and str(f).count("/") == 1})


def _exported_providers(dist: Any, package: str) -> list[str]:
    """``*Provider`` names in the package's ``__all__``, read from its source without importing it."""
    try:
        source = dist.locate_file(f"{package}/__init__.py").read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                names = ast.literal_eval(node.value)
            except ValueError:
                return []
            return [n for n in names if isinstance(n, str) and n.endswith("Provider")]
    return []
