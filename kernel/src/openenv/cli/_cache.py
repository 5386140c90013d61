"""The ``openenv --help`` cache: the plugin commands and the rendered root help, keyed by metadata.

``openenv --help`` should answer without importing typer, the plugins or anything heavy. Both
things it needs are stored in one small JSON file (``openenv_cli.json`` in ``$OPENENV_CACHE_DIR``,
else ``$XDG_CACHE_HOME/openenv`` or ``~/.cache/openenv``) under a key computed from metadata
only:

* the kernel's version and the modification times of the CLI's own modules (``openenv/cli``),
* every ``openenv`` entry point: name, target, distribution name and version, and the
  modification time of its ``.dist-info`` folder (rewritten on every install),
* the plugin-selection variables (``OPENENV_DISABLE_PLUGINS``, ``OPENENV_LOAD_PLUGINS``,
  ``OPENENV_STRICT_PLUGINS``).

A key that does not match means a miss: the caller builds the app the normal way and records the
result. ``OPENENV_NO_CLI_CACHE=1`` turns the cache off; a cache that cannot be read or written is
simply not used. Standard library only, and no typer here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["cache_key", "cached_help", "cached_listing", "help_width", "store"]

#: Environment variables that change which plugins load (so they are part of the key).
_PLUGIN_VARS = ("OPENENV_DISABLE_PLUGINS", "OPENENV_LOAD_PLUGINS", "OPENENV_STRICT_PLUGINS")
_CACHE_FILE = "openenv_cli.json"
_SCHEMA = "openenv.cli-cache/1"


def _cache_path() -> Path:
    base = os.environ.get("OPENENV_CACHE_DIR")
    if base:
        return Path(base) / _CACHE_FILE
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "openenv" / _CACHE_FILE


def _mtime(path: Any) -> str:
    try:
        return str(os.stat(path).st_mtime_ns)
    except (OSError, TypeError):
        return ""


def cache_key() -> str | None:
    """The key for the current installation; ``None``: do not use the cache."""
    if os.environ.get("OPENENV_NO_CLI_CACHE", "").lower() in {"1", "true", "yes"}:
        return None
    import sys

    plugins_module = sys.modules.get("openenv.plugins")
    if plugins_module is not None and plugins_module._GLOBAL is not None:
        return None  # a plugin manager is in use (embedding, tests): ask it, not the cache
    import importlib.metadata as md

    from openenv import __version__

    here = Path(__file__).parent
    parts: list[str] = [__version__, *(f"{v}={os.environ.get(v, '')}" for v in _PLUGIN_VARS)]
    parts += [f"{entry.name}@{_mtime(entry.path)}" for entry in os.scandir(here) if entry.name.endswith(".py")]
    for ep in md.entry_points(group="openenv"):
        dist = ep.dist
        parts.append("|".join((ep.name, ep.value, dist.name if dist else "", dist.version if dist else "",
                               _mtime(getattr(dist, "_path", None)))))
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def help_width() -> int:
    """The width click formats help for in this terminal (its own rule: 50 to 78 columns)."""
    import shutil

    return max(min(shutil.get_terminal_size().columns, 80) - 2, 50)


def _read(key: str) -> dict[str, Any] | None:
    try:
        doc = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _SCHEMA or doc.get("key") != key:
        return None
    return doc


def cached_listing(key: str) -> list[tuple[str, str]] | None:
    """The plugin commands (name, help) recorded under ``key``, or ``None`` on a miss."""
    doc = _read(key)
    rows = doc.get("commands") if doc else None
    if not isinstance(rows, list):
        return None
    return [(str(r[0]), str(r[1])) for r in rows if isinstance(r, list) and len(r) == 2]


def cached_help(key: str, width: int) -> str | None:
    """The root help rendered for ``width`` columns under ``key``, or ``None`` on a miss."""
    doc = _read(key)
    texts = doc.get("help") if doc else None
    text = texts.get(str(width)) if isinstance(texts, dict) else None
    return text if isinstance(text, str) else None


def store(key: str, *, commands: list[tuple[str, str]] | None = None, help_text: tuple[int, str] | None = None) -> None:
    """Record the plugin commands and/or one rendered help text under ``key`` (kept with what is
    already recorded under the same key)."""
    doc = _read(key) or {"schema": _SCHEMA, "key": key, "commands": None, "help": {}}
    if commands is not None:
        doc["commands"] = [list(row) for row in commands]
    if help_text is not None:
        doc.setdefault("help", {})[str(help_text[0])] = help_text[1]
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
