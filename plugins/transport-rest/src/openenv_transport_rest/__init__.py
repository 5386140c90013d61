"""OpenEnv HTTP transport with real sessions, plus upstream's legacy one-shot routes.

Modules: ``server`` (``RestTransport``), ``client`` (``HttpConnector``), ``models`` (bodies and
header names), ``openapi`` (the ``/openapi.json`` document), ``plugin`` (registration). Nothing is
imported here so that loading the plugin stays cheap.
"""

from __future__ import annotations

__all__: list[str] = []
