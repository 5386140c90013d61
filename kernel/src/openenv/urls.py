"""Small URL helpers every client and provider needs: loopback hosts and http ↔ ws base URLs.

Promises:

* ``is_loopback(host)`` is true exactly for names of this machine: ``localhost`` (and
  ``*.localhost``), ``127.0.0.0/8`` and ``::1``, with or without ``[...]`` and in any case. It never
  resolves a name (no DNS): clients use it to decide that a server is reached without a proxy.
* ``ws_base_url(base_url)`` turns a server's base URL into its WebSocket base: ``http``→``ws``,
  ``https``→``wss``, ``ws``/``wss`` kept, no scheme → ``ws://`` (upstream's rule, docs/protocol.md §8.1),
  trailing ``/`` removed, path prefix kept. An unknown scheme or a URL without a host is a
  ``ValueError`` that names the accepted schemes. No endpoint (``/ws``) is appended.
* ``http_base_url(base_url)`` is the reverse: ``ws``→``http``, ``wss``→``https``, no scheme (or an
  unknown one) → ``http``, trailing ``/`` removed, path prefix kept, query and fragment dropped.
  It is lenient on purpose: it serves clients that derive a side route (``/mcp``) from a URL the
  user already gave to the WebSocket client.

Standard library only (the kernel's dependency-light rule).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit, urlunsplit

__all__ = ["http_base_url", "is_loopback", "ws_base_url"]

_TO_WS = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
_TO_HTTP = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def ws_base_url(base_url: str) -> str:
    """``ws(s)://host[:port][/prefix]`` for the server at ``base_url`` (see the module docstring)."""
    url = base_url.strip()
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "ws", url
    rest = rest.rstrip("/")
    target = _TO_WS.get(scheme.lower())
    if target is None:
        raise ValueError(
            f"Unsupported URL scheme {scheme!r} in {base_url!r}: use http, https, ws or wss."
        )
    if not rest:
        raise ValueError(f"Base URL {base_url!r} has no host.")
    return f"{target}://{rest}"


def http_base_url(base_url: str) -> str:
    """``http(s)://host[:port][/prefix]`` for the server at ``base_url`` (see the module docstring)."""
    url = base_url.strip()
    if "://" not in url:  # upstream's rule: no scheme means plain (ws → http)
        url = "http://" + url
    parts = urlsplit(url)
    scheme = _TO_HTTP.get(parts.scheme.lower(), "http")
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
