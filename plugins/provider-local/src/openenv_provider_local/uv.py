"""The ``uv`` provider: the env server in its own throw-away environment built by ``uv run``.

For envs whose dependencies must not mix with the caller's. The child is::

    uv run --isolated --no-project --python <X.Y> --with <kernel> --with <transport>...
           --with <env package> [--with <extra>...] -- python -m openenv serve <env> ...

What goes into that environment:

* the kernel (``openenv``), the transports (``LaunchSpec.options["transports"]``, default
  ``["ws"]``) and the env package, each as the *source this process uses*: the local folder for a
  path or editable install (a workspace checkout; an editable install is installed editable in the
  child too, with ``--with-editable``, so it runs today's source and never a stale cached build),
  ``name @ url`` for a VCS/URL install, otherwise ``name==version`` from the package index;
* the env package is ``options["package"]`` (a path or a requirement) when given, else the
  distribution that registered the env name here; a ``module:Class`` env needs ``package`` (or an
  importable module via ``PYTHONPATH`` in ``env_vars``);
* ``options["with"]``: extra requirements (a string or a list);
* ``options["python"]``: the interpreter request for uv (default: this interpreter's ``X.Y``).

uv caches what it builds, so only the first start of a given set of sources is slow; give that
start a generous ``startup_timeout_s``. Everything else (readiness, ``stop``, records, logs) is as
for the ``local`` provider; the process group covers both ``uv`` and the server it runs.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import shutil
import sys
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv.plugins import KERNEL_DIST
from openenv_provider_local.base import ProcessProvider

__all__ = ["UvProvider", "dist_source", "uv_binary"]


def uv_binary(explicit: str | None = None) -> str:
    """Path of the ``uv`` executable; ``ConfigError`` saying how to install it if missing."""
    if explicit:
        return explicit
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # the `uv` package from PyPI ships the binary

        return str(find_uv_bin())
    except Exception:
        pass
    raise ConfigError(
        "The 'uv' provider needs the uv executable, which is not on PATH. Install it "
        "(`pip install uv` or https://docs.astral.sh/uv/), or use --provider local."
    )


def dist_source(dist_name: str) -> str:
    """How to install ``dist_name`` exactly as this process has it: a folder, ``name @ url`` or
    ``name==version``. ``ConfigError`` if it is not installed."""
    try:
        dist = md.distribution(dist_name)
    except md.PackageNotFoundError:
        raise ConfigError(
            f"Package '{dist_name}' is not installed here, so the uv provider cannot tell which "
            "version to use. Install it, or name it in LaunchSpec.options['package'/'with']."
        ) from None
    direct = dist.read_text("direct_url.json")
    if direct:
        try:
            info = json.loads(direct)
        except ValueError:
            info = {}
        url = str(info.get("url", ""))
        if url.startswith("file://") and "dir_info" in info:
            return unquote(urlsplit(url).path)
        if "vcs_info" in info:
            vcs = info["vcs_info"]
            commit = vcs.get("commit_id")
            return f"{dist.metadata['Name']} @ {vcs.get('vcs', 'git')}+{url}" + (f"@{commit}" if commit else "")
        if url:
            return f"{dist.metadata['Name']} @ {url}"
    return f"{dist.metadata['Name']}=={dist.version}"


class UvProvider(ProcessProvider):
    """Env servers in isolated environments made by ``uv run``, on 127.0.0.1."""

    name: ClassVar[str] = "uv"
    options: ClassVar[frozenset[str]] = frozenset({"package", "with", "python", "uv"})

    def command(self, spec: LaunchSpec, serve_args: list[str]) -> list[str]:
        opts = spec.options
        python = str(opts.get("python") or f"{sys.version_info.major}.{sys.version_info.minor}")
        argv = [uv_binary(opts.get("uv")), "run", "--isolated", "--no-project", "--python", python]
        editable = _editable_folders()
        for source in self.sources(spec):
            # An editable install here runs the source tree as it is now: so does the child
            # (a plain ``--with <folder>`` would reuse uv's cached build of an older tree).
            argv += ["--with-editable" if source in editable else "--with", source]
        argv += ["--", "python", "-m", "openenv", "serve", *serve_args]
        return argv

    def sources(self, spec: LaunchSpec) -> list[str]:
        """What ``uv run --with`` installs for ``spec`` (see the module docstring)."""
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        opts = spec.options
        sources = [dist_source(KERNEL_DIST)]
        transports = opts.get("transports") or ["ws"]
        for name in [transports] if isinstance(transports, str) else transports:
            sources.append(dist_source(_dist_of(pm, pm.catalog.transports.get(str(name)).plugin)))
        package = opts.get("package")
        if package:
            sources.append(str(package))
        elif ":" not in spec.env:
            sources.append(dist_source(_dist_of(pm, pm.catalog.envs.get(spec.env).plugin)))
        extra = opts.get("with") or []
        sources += [extra] if isinstance(extra, str) else [str(e) for e in extra]
        # Keep the first occurrence of each source; uv refuses nothing here but duplicates are noise.
        return list(dict.fromkeys(sources))

    def child_environment(self, spec: LaunchSpec) -> dict[str, str]:
        env = super().child_environment(spec)
        # Our own venv must not leak into the isolated one (uv would warn, and PYTHONPATH-style
        # leakage is exactly what this provider exists to avoid).
        env.pop("VIRTUAL_ENV", None)
        return env


def _editable_folders() -> set[str]:
    """Folders of the distributions installed here in editable mode (a workspace checkout)."""
    folders = set()
    for dist in md.distributions():
        try:
            info = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        url = str(info.get("url", ""))
        if url.startswith("file://") and (info.get("dir_info") or {}).get("editable"):
            folders.add(unquote(urlsplit(url).path))
    return folders


def _dist_of(pm: object, plugin: str) -> str:
    info = getattr(pm, "infos", {}).get(plugin)
    dist = getattr(info, "dist", None)
    if not dist:
        raise ConfigError(
            f"Cannot tell which package provides plugin '{plugin}'; pass "
            "LaunchSpec.options['package'] (a path or a requirement)."
        )
    return str(dist)
