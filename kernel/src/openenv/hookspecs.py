"""The whole plugin contract, in one module.

A plugin is a module (or object) with functions decorated ``@openenv.hookimpl`` named after the
hooks below, published through the entry-point group ``openenv``::

    # pyproject.toml
    [project.entry-points.openenv]
    my_env = "my_env_package.plugin"

Kinds of hooks:

* **Catalogue hooks** (``openenv_register_*``) run once at start-up, receive a typed registry and
  return nothing. Register lazy ``"module:Object"`` references so listing stays cheap.
* **Decision hooks** are ``firstresult``: the first non-``None`` answer wins; the kernel's built-in
  answer is ``trylast``, so any plugin can override it.
* **Lifecycle hooks** let observers watch servers and sessions. They are called outside the
  per-step path and their exceptions are logged, never propagated to the client.

Hooks evolve only by adding arguments (pluggy passes each implementation the ones it names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("openenv")
hookimpl = pluggy.HookimplMarker("openenv")


# -- catalogue hooks ------------------------------------------------------------------------------


@hookspec
def openenv_register_envs(registry: Registry) -> None:
    """Register environments: ``registry.register("echo", "pkg.env:EchoEnv", description=..., manifest=...)``.

    The reference names an ``Environment`` subclass or a zero-argument factory. Extra keyword
    arguments (``manifest`` path, ``version``…) are shown by ``openenv envs list``. ``manifest``
    locates the env's ``openenv.yaml``: an absolute path, a path relative to the plugin module's
    folder, or ``"package:file.yaml"``; it is read without importing the env.
    """


@hookspec
def openenv_register_transports(registry: Registry) -> None:
    """Register transports, e.g.::

        registry.register("ws", "pkg.server:WebSocketTransport",
                          client="pkg.client:Connector", schemes=["ws", "wss"])


    The reference names an ``openenv.interfaces.ServerTransport`` subclass; the optional ``client``
    extra names an ``openenv.interfaces.ClientConnector`` subclass used by ``EnvClient``.
    """


@hookspec
def openenv_register_providers(registry: Registry) -> None:
    """Register providers: ``registry.register("docker", "pkg.provider:DockerProvider")``.

    The reference names an ``openenv.interfaces.Provider`` subclass.
    """


@hookspec
def openenv_register_rubrics(registry: Registry) -> None:
    """Register reusable reward functions (``openenv.interfaces.Rubric`` subclasses)."""


@hookspec
def openenv_register_commands(registry: Registry) -> None:
    """Register CLI sub-commands: ``registry.register("build", "pkg.cli:app", description=...)``.

    The reference names a ``typer.Typer`` (mounted as a command group) or a plain function
    (mounted as one command).
    """


# -- decision hooks -------------------------------------------------------------------------------


@hookspec(firstresult=True)
def openenv_choose_provider(env: str, requested: str | None, available: list[str]) -> str | None:
    """Choose the provider that launches ``env``.

    ``requested`` is what the user asked for (``--provider``), or ``None``. Return a provider name
    from ``available``, or ``None`` to let the next implementation decide. The kernel's fallback
    returns ``requested`` or ``"local"``.
    """


# -- lifecycle hooks (observers) ------------------------------------------------------------------


@hookspec
def openenv_server_started(info: dict[str, Any]) -> None:
    """A server started serving; ``info`` has ``env``, ``host``, ``port``, ``transports``, ``mode``."""


@hookspec
def openenv_server_stopped(info: dict[str, Any]) -> None:
    """A server stopped; same ``info`` as ``openenv_server_started``."""


@hookspec
def openenv_session_opened(info: dict[str, Any]) -> None:
    """A session was created; ``info`` has ``session_id``, ``env``, ``transport``, ``active_sessions``."""


@hookspec
def openenv_session_closed(info: dict[str, Any]) -> None:
    """A session ended; ``info`` as for ``openenv_session_opened`` plus ``reason`` and ``steps``."""
