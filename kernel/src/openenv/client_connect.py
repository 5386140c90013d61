"""How a client reaches a server: choosing the installed connector, and refusals that name the fix.

* ``resolve_connector(base_url, transport)`` returns a connector of the installed transport
  ``transport`` or, without one, of the first installed client transport that speaks the URL's
  scheme (WebSocket first: it is the reference protocol). The URL schemes of a connector are its
  ``schemes`` class attribute (read from the registry entry when it carries them, so choosing
  does not import every connector).
* ``refused(url, status, transport=...)`` is the ``ConnectionError`` a connector raises when the
  server answers the connection attempt with an HTTP error status: 401 says to pass ``token=`` or
  set ``OPENENV_TOKEN``; 403/404 on the WebSocket endpoint says the server has no ``/ws`` route
  and to use ``transport="rest"``. The status is kept as ``.status``.
* ``installed_env_for(repo_id)`` is the installed env a Hub-style name means, for the
  ``from_env`` bootstrap (``EnvClient.from_env``, and upstream's in ``openenv.core``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from openenv.errors import ConfigError

if TYPE_CHECKING:
    from openenv.interfaces import ClientConnector
    from openenv.registry import TransportEntry

__all__ = ["TOKEN_ENV", "ConnectRefused", "client_transport", "client_transports", "installed_env_for", "refused",
           "resolve_connector"]

#: Environment variable the client reads its bearer token from when ``token=`` is not given.
TOKEN_ENV = "OPENENV_TOKEN"


class ConnectRefused(ConnectionError):
    """The server answered the connection attempt with an HTTP error ``status``."""

    def __init__(self, message: str, *, url: str, status: int) -> None:
        super().__init__(message)
        self.url = url
        self.status = status

    def __str__(self) -> str:
        return str(self.args[0])


def refused(url: str, status: int, *, transport: str, detail: str = "") -> ConnectRefused:
    """The error for a connection attempt to ``url`` that the server answered with ``status``."""
    reason = f"HTTP {status}" + (f" ({detail})" if detail else "")
    if status == 401:
        fix = (f"The server requires a token: pass `token=` to the client or set `{TOKEN_ENV}` "
               "(the token the server was started with).")
    elif status == 403 and transport == "ws":
        fix = ("The server refused the WebSocket upgrade: it has no `/ws` route, or it refused the "
               "token. If it serves HTTP only, use `transport=\"rest\"`; otherwise check `token=` / "
               f"`{TOKEN_ENV}`.")
    elif status == 403:
        fix = f"The server refused the token: check `token=` / `{TOKEN_ENV}`."
    elif status == 404 and transport == "ws":
        fix = "The server has no `/ws` route (it may serve HTTP only): use `transport=\"rest\"`."
    elif status == 404:
        fix = ("The server has no HTTP session routes (it may serve WebSocket only, or run in "
               "production mode): use `transport=\"ws\"`.")
    else:
        fix = "Check the URL and that an OpenEnv server listens there."
    return ConnectRefused(f"Failed to connect to {url}: {reason}. {fix}", url=url, status=status)


def client_transports() -> list[TransportEntry]:
    """Installed transports that have a client connector, WebSocket first."""
    from openenv.plugins import get_plugin_manager

    entries = [e for e in get_plugin_manager().catalog.transports if e.client is not None]
    entries.sort(key=lambda e: (e.name != "ws", e.name))
    return entries


def _schemes(entry: TransportEntry) -> tuple[Any, ...]:
    return tuple(getattr(_connector_class(entry), "schemes", ()))


def _connector_class(entry: TransportEntry) -> type[ClientConnector]:
    return entry.load_client()  # type: ignore[no-any-return]  # kind-checked on load


def client_transport(name: str) -> TransportEntry:
    """The installed transport ``name``, which must have a client connector.

    Raises ``UnknownNameError`` (with a suggestion) for a transport that is not installed and
    ``ConfigError`` naming the transports that have a client for one that only serves.
    """
    from openenv.plugins import get_plugin_manager

    entry = get_plugin_manager().catalog.transports.get(name)
    if entry.client is None:
        names = ", ".join(e.name for e in client_transports()) or "none"
        raise ConfigError(
            f"Transport '{name}' has no client connector (it only serves). Transports with a "
            f"client: {names}.")
    return entry


def resolve_connector(base_url: str, transport: str | None) -> ClientConnector:
    """A connector of ``transport`` (or of the first installed one that speaks the URL's scheme)."""
    scheme = urlsplit(base_url).scheme or "ws"
    candidates = [client_transport(transport)] if transport is not None else client_transports()
    for entry in candidates:
        if scheme in _schemes(entry):
            return _connector_class(entry)()
    installed = ", ".join(e.name for e in candidates) or "none"
    raise ConfigError(
        f"No installed transport can connect to '{base_url}' (scheme '{scheme}'; client transports "
        f"installed: {installed}). Install one, e.g. `pip install openenvkit-transport-ws`."
    )


def installed_env_for(repo_id: str) -> str:
    """The installed env that a Hub-style name means: ``"openenv/echo-env"``, ``"echo-env"`` and
    ``"echo"`` all name ``echo`` (the ``from_env`` bootstrap). An env that is not installed is an
    ``UnknownNameError`` with the close matches."""
    from openenv.errors import UnknownNameError
    from openenv.plugins import get_plugin_manager

    known = [e.name for e in get_plugin_manager().catalog.envs]
    base = repo_id.rsplit("/", 1)[-1]
    candidates = [base, base.replace("-", "_")]
    for suffix in ("-env", "_env"):
        if base.endswith(suffix):
            stem = base[: -len(suffix)]
            candidates += [stem, stem.replace("-", "_")]
    for name in candidates:
        if name in known:
            return name
    raise UnknownNameError("env", base, known, hint="from_env(..., use_docker=False) starts an env installed "
                           "here (nothing is downloaded from the Hub): install its package, or pass a URL to "
                           "GenericEnvClient(base_url=...).")
