"""``openenv.AutoEnv`` / ``openenv.AutoAction``: upstream's "by name" entry points, over installed envs.

``AutoEnv.from_env(name)`` gives a client for the env installed here under ``name``
(``"echo"``, ``"echo-env"``, ``"echo_env"`` and ``"openenv/echo-env"`` all name ``echo``);
``AutoAction.from_env(name)`` gives its action class. Upstream looked for an installed
``openenv-*`` package or installed one from the Hugging Face Hub; here the env comes from the
plugin catalogue (``openenv envs list``) and nothing is downloaded.

How ``from_env`` reaches a server, as upstream's arguments ask:

* ``base_url=...`` connects to that server (``ConnectionError`` when nothing answers there);
* ``docker_image=...`` or ``container_provider=...`` starts that image with
  ``EnvClient.from_docker_image`` (our ``docker`` provider, or the given upstream
  ``ContainerProvider``);
* otherwise the installed env is started by the ``local`` provider (upstream started a Docker
  container from the env's default image; our envs are installed packages, so a subprocess serves
  them without an image). The server stops when the client is closed.

The client is typed by the env's declared types (``result.observation.echoed_message``), like
the env package's own client class upstream. ``skip_install=True`` gives a ``GenericEnvClient``
(dicts), as upstream's.
"""

from __future__ import annotations

import types
import urllib.error
import urllib.request
from typing import Any

from openenv.core.generic_client import GenericAction

__all__ = ["AutoAction", "AutoEnv"]


def _env_class(name: str) -> tuple[str, type]:
    """The registered env that ``name`` means, and its class (``UnknownNameError`` with close matches)."""
    from openenv.client_connect import installed_env_for
    from openenv.env import env_class_of
    from openenv.plugins import get_plugin_manager

    registered = installed_env_for(_strip_hub_url(name))
    pm = get_plugin_manager()
    cls = env_class_of(pm.catalog.envs.load(registered))
    if cls is None:
        raise ValueError(f"Env {registered!r} is registered as a factory function without a declared env class, "
                         "so its types are unknown: use GenericEnvClient / GenericAction for it, or annotate "
                         "the factory's return type with the env class.")
    return registered, cls


def _strip_hub_url(name: str) -> str:
    for prefix in ("https://huggingface.co/spaces/", "https://huggingface.co/", "hf://"):
        if name.startswith(prefix):
            return name[len(prefix):].strip("/")
    return name


def _client_class(env_name: str, env_cls: type) -> type:
    """An ``EnvClient`` subclass typed by the env's action, observation and state types."""
    from openenv.core.env_client import EnvClient
    from openenv.types import Action, Observation, State

    action = getattr(env_cls, "action_type", None) or Action
    observation = getattr(env_cls, "observation_type", None) or Observation
    state = getattr(env_cls, "state_type", None) or State
    base: Any = EnvClient[action, observation, state]  # type: ignore[valid-type]
    title = "".join(part.capitalize() for part in env_name.replace("-", "_").split("_")) or "Env"
    def body(ns: dict[str, Any]) -> None:
        ns.update(__module__=__name__, __doc__=f"Client of the {env_name!r} env.")

    # new_class, not type(): the base is a parametrised generic, whose __orig_bases__ types the client.
    return types.new_class(f"{title}Env", (base,), exec_body=body)


def _server_answers(base_url: str, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/health", timeout=timeout_s) as reply:
            return bool(200 <= reply.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, ValueError):
        return False


def _started_client(client_cls: Any, env: str, env_vars: dict[str, str], wait_timeout: float,
                    kwargs: dict[str, Any]) -> Any:
    """Start ``env`` with the ``local`` provider now; return a client that connects on first use.

    Not connected here: a client connected inside ``run_async_safely`` would belong to a loop that
    ends with it, and upstream's client connects lazily in whichever mode (sync/async) it is used.
    """
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider(env, "local"))()
    handle = provider.start(LaunchSpec(env=env, env_vars=env_vars, startup_timeout_s=max(wait_timeout, 1.0)))
    try:
        client = client_cls(base_url=handle.base_url, provider=handle, **kwargs)
    except BaseException:
        handle.stop()
        raise
    client._owns_provider = True  # closing the client stops the server it started
    return client


class AutoEnv:
    """Clients by env name: ``AutoEnv.from_env("echo", base_url="http://127.0.0.1:8000")``."""

    def __init__(self) -> None:
        raise TypeError("AutoEnv is not instantiated: call AutoEnv.from_env(name, ...).")

    @classmethod
    def get_env_class(cls, name: str) -> type:
        """The client class for ``name`` (typed by the env's action, observation and state)."""
        registered, env_cls = _env_class(name)
        return _client_class(registered, env_cls)

    @classmethod
    def from_env(
        cls,
        name: str,
        base_url: str | None = None,
        docker_image: str | None = None,
        container_provider: Any = None,
        wait_timeout: float = 30.0,
        env_vars: dict[str, str] | None = None,
        trust_remote_code: bool = False,
        skip_install: bool = False,
        **kwargs: Any,
    ) -> Any:
        """A client for ``name``: connected to ``base_url``, or to a server started for it (see the module)."""
        from openenv.core.generic_client import GenericEnvClient
        from openenv.core.utils import run_async_safely

        if base_url is not None and not _server_answers(base_url):
            raise ConnectionError(f"Server not available at {base_url} (GET /health did not answer). Start it "
                                  f"(`openenv serve {name}`) or leave out base_url to start one.")
        if skip_install:
            if base_url is not None:
                return GenericEnvClient(base_url=base_url, **kwargs)
            client_cls: Any = GenericEnvClient
            registered = name
        else:
            registered, env_cls = _env_class(name)
            client_cls = _client_class(registered, env_cls)
        if base_url is not None:
            return client_cls(base_url=base_url, **kwargs)
        if docker_image is not None or container_provider is not None:
            return run_async_safely(client_cls.from_docker_image(
                docker_image or registered, provider=container_provider, wait_timeout=wait_timeout,
                env_vars=env_vars or {}, **kwargs))
        if skip_install:
            from openenv.client_connect import installed_env_for

            registered = installed_env_for(_strip_hub_url(name))
        return _started_client(client_cls, registered, env_vars or {}, wait_timeout, kwargs)


class AutoAction:
    """Action classes by env name: ``EchoAction = AutoAction.from_env("echo-env")``."""

    def __init__(self) -> None:
        raise TypeError("AutoAction is not instantiated: call AutoAction.from_env(name).")

    @classmethod
    def from_env(cls, name: str, skip_install: bool = False) -> type:
        """The action class of the env installed as ``name``; ``GenericAction`` with ``skip_install=True``."""
        if skip_install:
            return GenericAction
        _registered, env_cls = _env_class(name)
        from openenv.types import Action

        return getattr(env_cls, "action_type", None) or Action

    from_hub = from_env
