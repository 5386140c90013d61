"""``openenv.core.llm_client``: upstream's LLM client wrappers are not provided.

Importing this module raises ``UnsupportedFeature``; call your model provider's SDK directly.
"""

from __future__ import annotations

from openenv.core._unsupported import refuse

__all__: list[str] = []

refuse(
    "`openenv.core.llm_client` (OpenAIClient, AnthropicClient, …)",
    "call your model provider's SDK (openai, anthropic, …) directly",
    "LLM clients are outside the environment contract",
)
