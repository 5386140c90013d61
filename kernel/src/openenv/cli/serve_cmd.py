"""``openenv serve ENV``: serve one environment over every installed (or chosen) transport.

``ENV`` is a registered name (``openenv envs list``), a ``module:Class`` reference, a ``module:app``
reference to an app built by ``create_app`` (e.g. an upstream-style ``server/app.py``), or the folder
of an env package with an ``openenv.yaml`` (``./my_env``): its ``app:`` entry is imported with the
folder on ``sys.path``, as ``uvicorn server.app:app`` run from that folder would. Module references
are also looked up in the current directory (as uvicorn does). An app is rebuilt with the options
given on the command line; options left out keep the app's own settings (``max_concurrent_envs``…).

The server binds 127.0.0.1 unless told otherwise; ``--port 0`` picks a free port, and
``--ready-file`` receives ``{"host", "port", "pid"}`` once connections are accepted (how providers
learn the port). ``--fd N`` serves on a listening socket the caller bound and passed down instead
(the ``bwrap`` provider's way into a sandbox that has no network of its own).

Exit codes: 130 after Ctrl-C (the server shuts down cleanly first; SIGTERM likewise ends it as
that signal's default does); 2 for bad input (an unknown env or
transport, a rule violation such as ``--max-sessions 4`` for an env that is not concurrency-safe);
1 when serving fails (the port is in use, the env cannot be imported). Expected failures print one
``error:`` line and no traceback; an env that fails to import also prints the traceback, since the
bug is in the env's code.

Heavy modules (the server, uvicorn, the env) are imported inside the command, so ``openenv --help``
stays fast.
"""

from __future__ import annotations

import os
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, fail, warn
from openenv.cli._serve_target import (
    _load_failure,
    _looks_like_path,
    _package_app,
    _package_ref_for,
    _registered_manifest_rubric,
)
from openenv.modes import Mode
from openenv.urls import is_loopback

__all__ = ["DIE_WITH_PARENT_ENV", "cwd_importable", "register", "serve"]


def cwd_importable() -> None:
    """Let ``module:Name`` references import from the current folder, as uvicorn does: every
    command that takes one (``serve``, ``validate``, ``run`` through ``serve``) finds the same
    modules."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())

#: Set by process providers: the server then asks Linux to SIGTERM it when its parent dies.
DIE_WITH_PARENT_ENV = "OPENENV_DIE_WITH_PARENT"


class LogLevel(StrEnum):
    critical = "critical"
    error = "error"
    warning = "warning"
    info = "info"
    debug = "debug"
    trace = "trace"


def serve(
    ctx: typer.Context,
    env: Annotated[str, typer.Argument(help="Registered env name, 'module:Class', 'module:app', or an env "
                                       "folder with openenv.yaml (./my_env).")],
    host: Annotated[str, typer.Option(help="Interface to bind. Keep 127.0.0.1 unless a token "
                                      "protects the server.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind; 0 picks a free one.", min=0,
                                      max=65535)] = 8000,
    workers: Annotated[int, typer.Option(
        "--workers", min=1, help="Server processes behind the one port (all cores of a host): WebSocket "
        "sessions stay on their process, HTTP sessions are routed to theirs; --max-sessions is the "
        "total (docs/workers.md).")] = 1,
    max_sessions: Annotated[int | None, typer.Option(
        "--max-sessions", min=1, show_default=False,
        help="Concurrent sessions (default: 64 for an env declaring SUPPORTS_CONCURRENT_SESSIONS, "
        "else 1; more than 1 needs a concurrency-safe env).")] = None,
    token: Annotated[str | None, typer.Option(
        envvar="OPENENV_TOKEN", show_envvar=True, show_default=False,
        help="Bearer token clients must send. Prefer the environment variable: command lines "
        "are visible to other users.")] = None,
    tokens_file: Annotated[Path | None, typer.Option(
        "--tokens-file", show_default=False,
        help='Several credentials: a JSON file {"<token>": "<principal>", ...}. Each principal sees '
        "only its own sessions.")] = None,
    mode: Annotated[Mode | None, typer.Option(help="Server mode (default: $OPENENV_MODE or "
                                              "simulation).", show_default=False)] = None,
    strict_production: Annotated[bool, typer.Option(
        "--strict-production", help="In production mode, refuse reset/step on every session too "
        "(only tools and state remain).")] = False,
    transport: Annotated[list[str] | None, typer.Option(
        "--transport", help="Transport to mount (repeatable; default: every installed one).",
        show_default=False)] = None,
    step_timeout: Annotated[float, typer.Option(
        "--step-timeout", help="Seconds a reset/step/state (and building the env) may take; an env "
        "call that overruns fails its session and frees the slot. 0 disables.", min=0)] = 300.0,
    isolation: Annotated[str, typer.Option(
        "--isolation", help="Where each session's env runs: 'thread' (a thread per session) or "
        "'process' (a worker process per session, killed when a call overruns: for envs that may "
        "hang, crash or call os._exit).")] = "thread",
    allow_open: Annotated[bool, typer.Option(
        "--allow-open", envvar="OPENENV_ALLOW_OPEN",
        help="Accept serving a non-loopback --host without a token (anyone who can reach it can use "
        "the env).")] = False,
    idle_timeout: Annotated[float | None, typer.Option(
        "--idle-timeout", help="Seconds before a session with no connection is closed.",
        min=0.001)] = 300.0,
    max_message_mb: Annotated[float, typer.Option(
        "--max-message-mb", help="Largest inbound WebSocket frame in MiB (larger ones close with 1009).",
        min=0.001)] = 100.0,
    max_body_budget_mb: Annotated[float, typer.Option(
        "--max-body-budget-mb", help="MiB of large request bodies and WebSocket messages held at once "
        "across all connections; past it HTTP bodies get 503 and WebSocket reads are paused. A "
        "message costs several times its size while it is handled.", min=1)] = 256.0,
    ping_interval: Annotated[float, typer.Option(
        "--ping-interval", help="Seconds between server WebSocket pings; 0 disables them.", min=0)] = 20.0,
    ping_timeout: Annotated[float, typer.Option(
        "--ping-timeout", help="Seconds to wait for a pong before dropping a dead connection; 0 waits "
        "forever.", min=0)] = 20.0,
    header_timeout: Annotated[float, typer.Option(
        "--header-timeout", help="Seconds a new connection has to send its request headers; 0 "
        "waits forever.", min=0)] = 10.0,
    max_connections: Annotated[int, typer.Option(
        "--max-connections", help="Connections held at once; past it the oldest one that has not "
        "sent a request is closed, or, if none is silent, the new one is refused with 503 (a "
        "WebSocket is never shed). 0: no cap.", min=0)] = 2048,
    ready_file: Annotated[Path | None, typer.Option(
        "--ready-file", help="Write {host, port, pid} as JSON here once accepting connections.",
        show_default=False)] = None,
    fd: Annotated[int | None, typer.Option(
        "--fd", help="Serve on the listening TCP socket inherited as this file descriptor instead of "
        "binding --host/--port (a provider that bound it outside a sandbox without network, e.g. bwrap).",
        min=0, show_default=False)] = None,
    uds: Annotated[Path | None, typer.Option(
        "--uds", help="Serve on this unix socket path instead of --host/--port (a sandbox that may not bind "
        "TCP ports, e.g. a Hugging Face pool sandbox).", show_default=False)] = None,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Server log level.")] = LogLevel.info,
    rubric: Annotated[str | None, typer.Option(
        "--rubric", help="Score every step with this registered rubric, NAME[=CONFIG] (replaces the "
        "env's own; `openenv rubrics list`). CONFIG is JSON or k=v,k=v.", show_default=False)] = None,
) -> None:
    """Serve an environment (WebSocket /ws, HTTP, ... as installed) until interrupted."""
    if os.environ.pop(DIE_WITH_PARENT_ENV, None):
        _die_with_parent()
    _configure_logging(log_level.value)

    from openenv.errors import ConfigError, PluginError, RuleViolation, UnknownNameError
    rubric_obj: Any = None
    from openenv.plugins import get_plugin_manager
    from openenv.server import ServerConfig, resolve_env
    from openenv.server import serve as run_server

    pm = get_plugin_manager()
    manifest_name = manifest_rubric = app_hint = None
    scheme, colon, _ = env.partition(":")
    if colon and scheme in pm.catalog.envs:
        pass  # ``NAME:ARG`` of a registered env (``harbor:./tasks``): resolve_env builds it from ARG
    elif _looks_like_path(env):
        env, manifest_name, manifest_rubric, app_hint = _package_app(env)
    elif ":" in env:
        cwd_importable()  # like uvicorn: `openenv serve server.app:app` inside the env folder
    for tname in transport or ():  # usage errors first, before any line about the env
        try:
            pm.catalog.transports.get(tname)
        except UnknownNameError as exc:
            fail(str(exc), EXIT_USAGE)
    if manifest_rubric is None and ":" not in env:
        manifest_rubric = _registered_manifest_rubric(env, pm)
    rubric_spec = rubric or manifest_rubric
    if rubric_spec is not None:  # a usage error too: check the rubric before serving anything
        from openenv.rubric_spec import rubric_from_spec

        try:
            rubric_obj = rubric_from_spec(rubric_spec, catalog=pm.catalog)
        except (UnknownNameError, ConfigError) as exc:
            where = "--rubric" if rubric else "the manifest's `rubric:`"
            fail(f"{where} {rubric_spec!r}: {exc}", EXIT_USAGE)
    from openenv.cli.plugins_cmd import announce_env
    announce_env(env, load=True)  # one line: which plugin serves it (or why none can)
    try:
        try:
            factory, name = resolve_env(env, pm)
        except Exception as exc:
            # `openenv serve server.app:app` inside an env folder whose server/ imports `..models`:
            # import it as the package it is (`<folder>.server.app:app`), as upstream's docs' module form.
            as_package = _package_ref_for(env, exc, Path.cwd())
            if as_package is None:
                raise
            env = as_package
            factory, name = resolve_env(env, pm)
    except UnknownNameError as exc:
        hint = (f" (A folder '{env}' with an openenv.yaml is here: pass ./{env} to serve it.)"
                if (Path(env) / "openenv.yaml").is_file() else "")
        fail(str(exc) + hint, EXIT_USAGE)
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, PluginError) and exc.__cause__ else exc
        missing = isinstance(cause, ModuleNotFoundError | AttributeError)
        fail(_load_failure(env, exc) + (f" {app_hint}" if app_hint and missing else ""), EXIT_ERROR)
    if rubric_spec is not None and not _is_asgi_app(factory):
        # the rubric's field paths against the env's models: a typo is a usage error now, not a
        # RUBRIC_ERROR on every step (create_app checks again, for servers built in code)
        from openenv.env import env_class_of
        from openenv.rubric import check_input_fields

        cls = env_class_of(factory)
        try:
            check_input_fields(rubric_obj, getattr(cls, "action_type", None), getattr(cls, "observation_type", None))
        except ConfigError as exc:
            where = "--rubric" if rubric else "the manifest's `rubric:`"
            fail(f"{where} {rubric_spec!r}: {exc}", EXIT_USAGE)

    if uds is not None and fd is not None:
        fail("--uds and --fd both say where to listen: give one of them.", EXIT_USAGE)
    tokens = _read_tokens(tokens_file) if tokens_file else None
    if not is_loopback(host) and not token and not tokens:
        if not allow_open:
            fail(f"Refusing to serve on {host} without a token: anyone who can reach this address "
                 "could use the env. Set OPENENV_TOKEN (or --token) to require one, bind 127.0.0.1, "
                 "or pass --allow-open (OPENENV_ALLOW_OPEN=1) to accept an open server.", EXIT_USAGE)
        warn(f"serving on {host} without a token (--allow-open): anyone who can reach this address "
             "can use the env.")
    settings: dict[str, Any] = {
        "max_sessions": max_sessions, "token": token or None, "tokens": tokens,
        "mode": mode.value if mode else None,  # None: env var/default
        "strict_production": strict_production,
        "transports": transport or None, "step_timeout_s": step_timeout or None,
        "factory_timeout_s": step_timeout or None, "isolation": isolation, "idle_timeout_s": idle_timeout,
        "env_name": manifest_name or name,
        "max_message_bytes": int(max_message_mb * 1024 * 1024),
        "max_body_budget_bytes": int(max_body_budget_mb * 1024 * 1024),
        "ping_interval_s": ping_interval or None, "ping_timeout_s": ping_timeout or None,
        "rubric": rubric_obj if rubric_spec is not None else None,
        "header_timeout_s": header_timeout or None, "max_connections": max_connections or None,
    }
    built = getattr(getattr(factory, "state", None), "openenv_build", None)
    if isinstance(built, dict):
        settings = _merge_app_settings(ctx, settings, built["config"])
    elif _is_asgi_app(factory):
        fail(f"'{env}' is an ASGI app that openenv's create_app did not build, so its sessions and "
             "transports are not openenv's. Serve it with uvicorn, or point `openenv serve` at the env "
             "class ('module:MyEnvironment').", EXIT_USAGE)
    try:
        config = ServerConfig(host=host, port=port, **settings)
    except (RuleViolation, ConfigError) as exc:
        fail(str(exc), EXIT_USAGE)
    if workers > 1:
        raise typer.Exit(_serve_workers(ctx, workers, config, ready_file, fd, uds))
    try:
        run_server(factory, config=config,
                   ready_file=str(ready_file) if ready_file else None, log_level=log_level.value,
                   listen_fd=fd, uds=str(uds) if uds else None)
    except (RuleViolation, UnknownNameError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (ConfigError, PluginError) as exc:
        fail(str(exc), EXIT_ERROR)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _serve_workers(ctx: typer.Context, workers: int, config: Any, ready_file: Path | None, fd: int | None,
                   uds: Path | None) -> int:
    """``--workers N``: the front process of openenvkit-serve-uvicorn, with N workers started with
    this command's own options (docs/workers.md)."""
    from openenv.plugins import get_plugin_manager

    try:
        code = get_plugin_manager().hook.openenv_serve_workers(
            workers=workers, serve_args=_given_args(ctx), config=config, max_sessions=ctx.params["max_sessions"],
            ready_file=str(ready_file) if ready_file else None, fd=fd, uds=str(uds) if uds else None)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    if code is None:
        fail("--workers needs the openenvkit-serve-uvicorn package (pip install openenvkit-serve-uvicorn), "
             "or serve with one process (leave --workers out).", EXIT_USAGE)
    return int(code)


def _given_args(ctx: typer.Context) -> list[str]:
    """The options given on the command line, as arguments again (for the worker processes; what
    came from the environment reaches them through it)."""
    out: list[str] = []
    for param in ctx.command.params:  # typer ships its own click: duck-typed, not isinstance
        name = param.name or ""
        value = ctx.params.get(name)
        source = ctx.get_parameter_source(name)
        if param.param_type_name == "argument":
            out.append(str(value))
            continue
        if source is None or source.name != "COMMANDLINE" or param.param_type_name != "option":
            continue
        if getattr(param, "is_flag", False):
            flag = param.opts[0] if value else (param.secondary_opts or [""])[0]
            if flag:
                out.append(flag)
            continue
        for item in value if param.multiple and isinstance(value, list | tuple) else [value]:
            out += [param.opts[0], str(getattr(item, "value", item))]
    return out


#: CLI parameter → ServerConfig field, for options an app may have set itself.
_APP_SETTINGS = {"max_sessions": "max_sessions", "token": "token", "mode": "mode", "transport": "transports",
                 "strict_production": "strict_production",
                 "step_timeout": "step_timeout_s", "idle_timeout": "idle_timeout_s", "isolation": "isolation",
                 "max_message_mb": "max_message_bytes", "max_body_budget_mb": "max_body_budget_bytes",
                 "ping_interval": "ping_interval_s",
                 "ping_timeout": "ping_timeout_s"}


def _merge_app_settings(ctx: typer.Context, settings: dict[str, Any], app_config: object
                        ) -> dict[str, Any]:
    """Options not given on the command line (nor by environment variable) keep the app's values."""
    merged = dict(settings)
    for param, field in _APP_SETTINGS.items():
        source = ctx.get_parameter_source(param)
        if source is None or source.name == "DEFAULT":
            merged[field] = getattr(app_config, field)
    merged["env_name"] = getattr(app_config, "env_name", None) or settings["env_name"]
    if merged.get("rubric") is None:  # --rubric, then the manifest's, then the app's own
        merged["rubric"] = getattr(app_config, "rubric", None)
    return merged


def _is_asgi_app(obj: object) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "router") and callable(obj)


def _configure_logging(level: str) -> None:
    """Show the kernel's own messages (``serving on ...``) at the chosen level, on stderr."""
    import logging

    numeric = logging.DEBUG if level in ("debug", "trace") else getattr(logging, level.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
    logger = logging.getLogger("openenv")
    logger.addHandler(handler)
    logger.setLevel(numeric)
    logger.propagate = False


def _die_with_parent() -> None:
    """Ask Linux for SIGTERM when our parent exits (no-op elsewhere); exit if it already did."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    parent = os.getppid()
    if parent == 1:  # re-parented to init: whoever started us is already gone
        raise SystemExit(EXIT_ERROR)
    import threading

    def watch_parent() -> None:
        # The SIGTERM above starts a graceful shutdown; should anything hold it (an env stuck in
        # native code, a handler that ignores signals), this makes the exit certain.
        while os.getppid() == parent:
            time.sleep(0.5)
        time.sleep(_ORPHAN_GRACE_S)
        sys.stderr.write(f"openenv serve: parent process {parent} is gone and the shutdown did not "
                         f"finish within {_ORPHAN_GRACE_S:.0f} s; exiting.\n")
        sys.stderr.flush()
        os._exit(EXIT_ERROR)

    threading.Thread(target=watch_parent, name="openenv-parent-watch", daemon=True).start()


#: Seconds an orphaned server (its provider parent gone) has to shut down before it exits anyway.
_ORPHAN_GRACE_S = 3.0


def register(app: typer.Typer) -> None:
    """Add ``openenv serve`` to ``app``."""
    app.command("serve", no_args_is_help=True)(serve)


def _read_tokens(path: Path) -> dict[str, str]:
    """The ``--tokens-file`` mapping (token → principal); a usage error that says what is wrong."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"Cannot read --tokens-file {path}: {exc.strerror}.", EXIT_USAGE)
    except ValueError as exc:
        fail(f"--tokens-file {path} is not JSON ({exc}); write an object "
             '{"<token>": "<principal>", ...}.', EXIT_USAGE)
    if not isinstance(data, dict) or not data or not all(
            isinstance(k, str) and k and isinstance(v, str) and v for k, v in data.items()):
        fail(f"--tokens-file {path} must hold a non-empty JSON object mapping each token to a principal "
             'name: {"<token>": "<principal>", ...}.', EXIT_USAGE)
    return dict(data)
