"""``openenv.core.env_server.web_interface``: upstream's helpers, without its Gradio web interface.

Importing this module always works, so an ``app.py`` that imports a helper from here (upstream
env apps load their metadata with ``load_environment_metadata``) keeps serving. The web interface
itself (``create_web_interface_app``, ``WebInterfaceManager``, ``get_quick_start_markdown``) is
not provided: *calling* one of those raises ``UnsupportedFeature`` naming the alternative.
Upstream's UI drove one shared env that bypassed sessions and capacity (docs/protocol.md §11 B12);
a web UI, when installed, is a transport plugin.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from openenv.core._unsupported import unsupported_callable
from openenv.env import Environment
from openenv.types import EnvironmentMetadata

__all__ = [
    "WebInterfaceManager",
    "create_web_interface_app",
    "get_quick_start_markdown",
    "load_environment_metadata",
]

_WHY = "Upstream's UI drove one shared env, bypassing sessions and capacity (docs/protocol.md §11 B12)"
_INSTEAD = ("serve the env with create_app(...); a web UI, when installed, is a transport plugin that mounts "
            "itself with per-connection sessions")

create_web_interface_app = unsupported_callable("`create_web_interface_app()`", _INSTEAD, _WHY)
WebInterfaceManager = unsupported_callable(
    "`WebInterfaceManager`",
    "drive the env through a normal session (EnvClient, or HTTP with an OpenEnv-Session-Id header)", _WHY)
get_quick_start_markdown = unsupported_callable(
    "`get_quick_start_markdown()`", "document your env's client in its README (served in GET /metadata)", _WHY)


def load_environment_metadata(env: Any, env_name: str | None = None) -> EnvironmentMetadata:
    """The env's metadata, with its README when one is found (upstream's documented contract).

    An env *instance* gives its own ``get_metadata()``. A factory (class, function or
    ``functools.partial``) is never called: the metadata is the class name, a default
    description and the README found next to the env's code or in the working directory.
    """
    if isinstance(env, Environment):
        return env.get_metadata()
    target = env.func if isinstance(env, functools.partial) else env
    name = str(target.__name__ if inspect.isclass(target)
               else (env_name or getattr(target, "__name__", None) or "environment"))
    return EnvironmentMetadata(name=name, description=f"{name} environment",
                               readme_content=_readme(target, env_name))


def _readme(target: Any, env_name: str | None) -> str | None:
    """README.md from ``ENV_README_PATH``, beside the env's module (or its package), or the working directory."""
    candidates: list[Path] = []
    if os.environ.get("ENV_README_PATH"):
        candidates.append(Path(os.environ["ENV_README_PATH"]))
    module = sys.modules.get(getattr(target, "__module__", "") or "")
    module_file = getattr(module, "__file__", None)
    if module_file:
        here = Path(module_file).resolve().parent
        candidates += [here / "README.md", here.parent / "README.md", here.parent.parent / "README.md"]
    candidates.append(Path.cwd() / "README.md")
    if env_name:
        candidates.append(Path.cwd() / env_name / "README.md")
    for path in candidates:
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
    return None
