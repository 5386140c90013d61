"""``openenv.core``: run code written for upstream OpenEnv 0.10 on this OpenEnv, unchanged.

This package is an import-path compatibility layer: upstream's module paths and names, mapped
onto the kernel (``openenv.env``, ``openenv.types``, ``openenv.server``, ``openenv.client``,
``openenv.tools``). It holds thin re-exports and adapters only; behaviour lives in the kernel and
its plugins. Nothing here is imported by ``import openenv`` or by the CLI.

Top-level names are upstream's: ``EnvClient``, ``SyncEnvClient``, ``GenericEnvClient``,
``GenericAction``, ``MCPToolClient``, ``MCPClientBase`` and everything in
``openenv.core.env_server``. Upstream's LLM clients (``OpenAIClient`` …) are not provided.
What differs and why: docs/coming-from-openenv.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from openenv.core._unsupported import UnsupportedFeature, unsupported_callable
from openenv.lazy import lazy_exports

_CLIENT_EXPORTS = {
    "EnvClient": "openenv.core.env_client",
    "SyncEnvClient": "openenv.core.sync_client",
    "GenericEnvClient": "openenv.core.generic_client",
    "GenericAction": "openenv.core.generic_client",
    "MCPClientBase": "openenv.core.mcp_client",
    "MCPToolClient": "openenv.core.mcp_client",
    "StepResult": "openenv.core.client_types",
}
_LLM = ("AnthropicClient", "LLMClient", "LLMResponse", "OpenAIClient", "ToolCall", "create_llm_client")


def _other(name: str) -> Any:
    """Upstream's LLM clients are stand-ins that refuse when used (with the alternative); every other name is
    ``openenv.core.env_server``'s (cached here on first use)."""
    value: Any
    if name in _LLM:
        if name in ("LLMResponse", "ToolCall"):  # upstream's response types are provided
            value = getattr(importlib.import_module("openenv.core.llm_client"), name)
        else:  # a stand-in that fails where it is used, not at import
            value = unsupported_callable(
                f"`openenv.core.{name}`", "call your model provider's SDK (openai, anthropic, …) directly",
                "Upstream's LLM client wrappers are outside the environment contract")
    else:
        from openenv.core import env_server

        try:
            value = getattr(env_server, name)
        except AttributeError:
            raise AttributeError(f"module 'openenv.core' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def _env_server_names() -> list[str]:
    from openenv.core import env_server

    return list(env_server.__all__)


__getattr__, __dir__, __all__ = lazy_exports(__name__, _CLIENT_EXPORTS, fallback=_other,
                                             also=sorted(set(_env_server_names()) | {"UnsupportedFeature"}))
