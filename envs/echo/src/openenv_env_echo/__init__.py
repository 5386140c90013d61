"""Echo environment: echoes a message back, reward 0.1 per character.

Names are imported on first use: loading the plugin hook module (``openenv_env_echo.plugin``),
which imports this package, must not import the env or the client stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_echo.client import EchoEnvClient
    from openenv_env_echo.env import AsyncEchoEnv, EchoEnv
    from openenv_env_echo.models import EchoAction, EchoObservation


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "AsyncEchoEnv": ".env",
    "EchoAction": ".models",
    "EchoEnv": ".env",
    "EchoEnvClient": ".client",
    "EchoObservation": ".models",
})
