"""openenvkit-gateway: a token-capture LLM gateway for agents inside environments.

``CaptureGateway`` speaks OpenAI Chat Completions, OpenAI Responses and Anthropic Messages to an
agent and Chat Completions (with vLLM's ``return_token_ids``) to the inference server; each
episode's calls become an ``EpisodeTrace`` of turns linked by exact token prefix.
"""

from __future__ import annotations

from openenv.lazy import lazy_exports

#: name -> module; resolved on first use, so loading the plugin's hooks (``openenv --help``, the
#: ``agent-eval`` command's registration) imports neither the server stack nor httpx.
_EXPORTS = {"CaptureGateway": "gateway", "GatewayLimits": "gateway", "Branch": "trace", "Drift": "trace",
            "EpisodeTrace": "trace", "TraceError": "trace", "Turn": "trace", "link_turn": "trace"}

__getattr__, __dir__, __all__ = lazy_exports(__name__, {name: f".{module}" for name, module in _EXPORTS.items()})
