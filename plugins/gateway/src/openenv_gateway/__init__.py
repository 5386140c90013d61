"""openenvkit-gateway: a token-capture LLM gateway for agents inside environments.

``CaptureGateway`` speaks OpenAI Chat Completions, OpenAI Responses and Anthropic Messages to an
agent and Chat Completions (with vLLM's ``return_token_ids``) to the inference server; each
episode's calls become an ``EpisodeTrace`` of turns linked by exact token prefix.
"""

from __future__ import annotations

from openenv_gateway.gateway import CaptureGateway, GatewayLimits
from openenv_gateway.trace import Branch, Drift, EpisodeTrace, TraceError, Turn, link_turn

__all__ = ["Branch", "CaptureGateway", "Drift", "EpisodeTrace", "GatewayLimits", "TraceError", "Turn", "link_turn"]
