"""``openenv.core.containers``: upstream's container/runtime providers are not provided.

Importing this module (or ``openenv.core.containers.runtime``) raises ``UnsupportedFeature``:
providers are plugins here (``openenv providers list``). Start an env through one with
``EnvClient.from_provider(env, provider="docker")`` (``"local"`` runs it as a subprocess).
"""

from __future__ import annotations

from openenv.core._unsupported import refuse

__all__: list[str] = []

refuse(
    "`openenv.core.containers` (LocalDockerProvider, UVProvider, …)",
    "MyEnv.from_provider(env, provider='docker') — or 'local', 'kubernetes', … as installed "
    "(`openenv providers list`) — starts the server and stops it when the client closes",
    "Providers are separately installed plugins",
)
