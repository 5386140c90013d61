"""``openenv.core.env_server.web_interface``: upstream's Gradio web interface is not provided.

Importing this module raises ``UnsupportedFeature``. Upstream's UI drove one shared env that
bypassed sessions and capacity (docs/protocol.md §11 B12); a web UI, when installed, is a transport plugin.
"""

from __future__ import annotations

from openenv.core._unsupported import refuse

__all__: list[str] = []

refuse(
    "`openenv.core.env_server.web_interface` (create_web_interface_app, WebInterfaceManager)",
    "serve the env with create_app(...); a web UI, when installed, is a transport plugin that mounts "
    "itself with per-connection sessions",
    "Upstream's UI drove one shared env, bypassing sessions and capacity (docs/protocol.md §11 B12)",
)
