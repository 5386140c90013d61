"""``openenv.core.llm_client``: upstream's response types, without its LLM client wrappers.

``ToolCall`` and ``LLMResponse`` (what trainers and harnesses pass around: TRL's OpenEnv harness
builds them from a chat completion) are provided with upstream's fields and
``to_message_dict``. The clients (``OpenAIClient``, ``AnthropicClient``, ``LLMClient``,
``create_llm_client``) are not: importing them raises ``UnsupportedFeature``; call your model
provider's SDK directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from openenv.core._unsupported import module_getattr

__all__ = ["LLMResponse", "ToolCall"]


@dataclass
class ToolCall:
    """One tool call of a model's answer: its ``id``, the tool's ``name`` and the parsed ``args``."""

    id: str
    name: str
    args: dict[str, Any]


@dataclass
class LLMResponse:
    """A model's answer: text ``content`` plus any ``tool_calls``."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)

    def to_message_dict(self) -> dict[str, Any]:
        """The answer as an OpenAI-style assistant message (tool arguments as JSON text)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function",
                 "function": {"name": call.name, "arguments": json.dumps(call.args)}}
                for call in self.tool_calls
            ]
        return message


_CLIENTS = "call your model provider's SDK (openai, anthropic, …) directly"
_WHY = "LLM clients are outside the environment contract"
__getattr__ = module_getattr("openenv.core.llm_client", {
    name: (_CLIENTS, _WHY) for name in ("OpenAIClient", "AnthropicClient", "LLMClient", "create_llm_client")
})
