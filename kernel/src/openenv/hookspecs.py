"""The whole plugin contract, in one module.

A plugin is a module (or object) with functions decorated ``@openenv.hookimpl`` named after the
hooks below, published through the entry-point group ``openenv``::

    # pyproject.toml
    [project.entry-points.openenv]
    my_env = "my_env_package.plugin"

Kinds of hooks (every hook, with its exact signature, is documented in ``docs/hooks.md``):

* **Catalogue hooks** (``openenv_register_*``) run once at start-up, receive the registry of their
  kind and return nothing. Register lazy ``"module:Object"`` references so listing stays cheap.
* **Decision hooks** are ``firstresult``: the first non-``None`` answer wins; the kernel's built-in
  answer is ``trylast``, so any plugin can override it.
* **Lifecycle hooks** let observers watch servers and sessions. They receive a typed event
  (``openenv.events``), run **on the server's event loop** (an observer must return quickly and
  never block), outside the per-step path, and their exceptions are logged, never propagated.

Call order is pluggy's: ``tryfirst`` implementations first, ``trylast`` ones last, the others in
reverse registration order. Hook wrappers (``wrapper=True`` / ``hookwrapper=True``) are supported
on decision hooks only; on catalogue and lifecycle hooks the plugin is refused at load with a
message (the kernel calls those implementations one at a time, so a wrapper would never run).

Hooks evolve only by adding arguments (pluggy passes each implementation the ones it names).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from typing import Any

    from openenv.context import ServerConfig, ServerContext
    from openenv.events import ServerStarted, ServerStopped, SessionClosed, SessionOpened
    from openenv.registry import (
        CommandRegistry,
        EnvRegistry,
        ProviderRegistry,
        RubricRegistry,
        TransportRegistry,
    )
    from openenv.serving import HttpServer

__all__ = ["hookimpl", "hookspec"]

hookspec = pluggy.HookspecMarker("openenv")
hookimpl = pluggy.HookimplMarker("openenv")


# -- catalogue hooks ------------------------------------------------------------------------------


@hookspec
def openenv_register_envs(registry: EnvRegistry) -> None:
    """Register environments: ``registry.register("echo", "pkg.env:EchoEnv", description=..., manifest=...)``.

    The reference names an ``Environment`` subclass or a zero-argument factory (checked when the
    entry is loaded). The keywords are ``description``, ``manifest``, ``version`` and ``tags``
    (shown by ``openenv envs list``); any other is refused. ``manifest``
    locates the env's ``openenv.yaml``: an absolute path, a path relative to the plugin module's
    folder, or ``"package:file.yaml"``; it is read without importing the env.
    """


@hookspec
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register transports, e.g.::

        registry.register("ws", server="pkg.server:WebSocketTransport",
                          client="pkg.client:Connector", description="...")

    ``server`` names an ``openenv.interfaces.ServerTransport`` subclass; ``client`` (or ``None``)
    an ``openenv.interfaces.ClientConnector`` subclass used by ``EnvClient``. The URL schemes the
    client speaks are declared once, as the connector's ``schemes`` ClassVar.
    """


@hookspec
def openenv_register_providers(registry: ProviderRegistry) -> None:
    """Register providers: ``registry.register("docker", "pkg.provider:DockerProvider")``.

    The reference names an ``openenv.interfaces.Provider`` subclass (checked when loaded).
    """


@hookspec
def openenv_register_rubrics(registry: RubricRegistry) -> None:
    """Register reusable reward functions: ``openenv.rubric.Rubric`` subclasses (classes, not
    instances), built by name from ``openenv serve --rubric NAME[=CONFIG]``, ``rubric:`` in
    ``openenv.yaml`` and ``openenv.rubric_spec.build_rubric``."""


@hookspec
def openenv_register_commands(registry: CommandRegistry) -> None:
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
    (``trylast``) returns ``requested`` or ``"local"`` when that provider is installed, and
    otherwise raises ``UnknownNameError`` with the closest name and the package to install. A
    plugin answering a name that is not in ``available`` is refused the same way.
    """


@hookspec(firstresult=True)
def openenv_make_server(app: Any, config: ServerConfig, ctx: ServerContext | None, log_level: str) -> HttpServer | None:
    """Build the HTTP server that runs ``app`` for ``openenv serve`` (``openenv.serving``).

    ``ctx`` is the app's ``ServerContext`` (``None`` for an app ``create_app`` did not build);
    ``log_level`` is uvicorn's. Return an ``openenv.serving.HttpServer`` (uvicorn ``Server``'s
    ``serve(sockets)``, ``started``, ``should_exit``): ``serve`` binds the socket and runs the loop.
    Return ``None`` to let the next implementation decide. The kernel's fallback (``trylast``) is
    plain uvicorn and logs which protections are off; ``openenvkit-serve-uvicorn`` answers with
    the hardened server (docs/security.md).
    """


@hookspec(firstresult=True)
def openenv_serve_workers(workers: int, serve_args: list[str], config: ServerConfig, max_sessions: int | None,
                          ready_file: str | None, fd: int | None, uds: str | None) -> int | None:
    """Run ``openenv serve --workers N`` (N > 1): one front process on ``config``'s address (or
    ``fd``/``uds``) and ``workers`` server processes started with ``serve_args`` (the command's
    own options), ``max_sessions`` in total; block until stopped and return the exit status.

    Return ``None`` to let the next implementation decide; with no answer the CLI names the package
    to install. Raise ``ValueError`` for options that cannot be split over the workers (printed as
    a usage error). ``openenvkit-serve-uvicorn`` implements it (docs/workers.md).
    """


@hookspec
def openenv_upstream_names(module: str) -> dict[str, str] | None:
    """Names a plugin provides in an upstream module that the kernel mirrors (for example
    ``openenv.core.harness``'s ``CLIHarnessAdapter``), as ``{name: "package.module:Object"}``.

    The kernel's module resolves such a name on first use by importing the reference the plugin
    gave (the kernel never imports a plugin by name); a name no plugin provides keeps its
    ``UnsupportedFeature`` message. Return ``None`` for modules the plugin does not extend.
    """


# -- lifecycle hooks (observers; they run on the event loop and must not block) -----------------


@hookspec
def openenv_server_started(event: ServerStarted) -> None:
    """A server started serving: ``event.env``, ``.host``, ``.port``, ``.mode``, ``.transports``."""


@hookspec
def openenv_server_stopped(event: ServerStopped) -> None:
    """A server stopped; the same fields as ``ServerStarted``."""


@hookspec
def openenv_session_opened(event: SessionOpened) -> None:
    """A session was created: ``event.session_id``, ``.env``, ``.transport``, ``.active_sessions``."""


@hookspec
def openenv_session_closed(event: SessionClosed) -> None:
    """A session ended: the fields of ``SessionOpened`` plus ``.reason`` and ``.steps``."""
