"""An LLM policy over any OpenAI-compatible chat-completions endpoint (``POST {base_url}/chat/completions``).

* MCP envs: the env's tools are offered as ``tools`` (function calling); the first tool call of
  the answer becomes ``{"type": "call_tool", "tool_name": ..., "arguments": ...}``.
* Other envs: the system prompt carries the action's JSON schema and the model answers with one
  JSON object (a fenced ```json block is accepted), which is the action.

Each answer comes back as a ``Decision`` whose info is the step's ``llm`` field in the record:
``usage`` (the endpoint's token counts), and when the endpoint returns them the sampled tokens'
``logprobs`` and ``tokens`` (OpenAI-style ``choices[0].logprobs.content``; ask for them with
``logprobs=True``), and vLLM's ``prompt_token_ids`` and ``token_ids``. Nothing is invented: a
key the endpoint did not send is absent.

The conversation of an episode is kept in ``ctx.state`` (each observation is a user message, each
answer an assistant message; tool results come back as ``tool`` messages). A reply that is not an
action raises ``PolicyError`` with the model's text, so the episode records what went wrong.

Image fields (those the schema declares with ``x-openenv-image``) go to the model as image content
parts (``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``), for vision
models, with a placeholder naming the field in the observation's JSON. Only the newest
observation's images are sent: an earlier one is replaced by a text note, so a long episode does
not resend every frame on every turn. (A ``tool`` message cannot hold images in the OpenAI format,
so a tool result's images follow it in a ``user`` message.)
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from openenv.errors import ConfigError
from openenv.images import is_image_value
from openenv_rollouts.envinfo import EnvInfo
from openenv_rollouts.policies import Decision, EpisodeContext, PolicyError

__all__ = ["LLMPolicy", "observation_content", "parse_json_action", "step_info", "tool_specs"]

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def tool_specs(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP tool listings as OpenAI ``tools`` entries."""
    return [{"type": "function", "function": {
        "name": t["name"], "description": t.get("description", ""),
        "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}} for t in tools]


def parse_json_action(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (bare, or in a fenced block)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text.strip()]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    raise PolicyError(f"the model's answer is not a JSON action object: {text[:300]!r}")


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def step_info(response: dict[str, Any]) -> dict[str, Any]:
    """What a chat completion says about its tokens: ``usage``, ``logprobs``/``tokens`` (OpenAI's
    ``choices[0].logprobs.content``), ``token_ids`` and ``prompt_token_ids`` (vLLM's, on the choice
    or the response), ``finish_reason`` and ``model``; only the keys the endpoint sent."""
    info: dict[str, Any] = {}
    choice = (response.get("choices") or [{}])[0]
    choice = choice if isinstance(choice, dict) else {}
    usage = response.get("usage")
    if isinstance(usage, dict):
        info["usage"] = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if isinstance(content, list) and content:
        entries = [e for e in content if isinstance(e, dict)]
        info["logprobs"] = [float(e.get("logprob", 0.0)) for e in entries]
        info["tokens"] = [str(e.get("token", "")) for e in entries]
    for key in ("token_ids", "prompt_token_ids"):
        ids = _int_list(choice.get(key)) or _int_list(response.get(key))
        if ids is not None:
            info[key] = ids
    if isinstance(choice.get("finish_reason"), str):
        info["finish_reason"] = choice["finish_reason"]
    if isinstance(response.get("model"), str):
        info["model"] = response["model"]
    return info


def _observation_text(observation: Any) -> str:
    if isinstance(observation, dict):
        observation = {k: v for k, v in observation.items() if k not in ("metadata",) or v}
    return json.dumps(observation, default=str)


def observation_content(observation: Any, image_fields: frozenset[str] | set[str],
                        prefix: str = "") -> tuple[str, list[dict[str, Any]]]:
    """The observation as text (image fields replaced by ``"<image: NAME, attached>"``) and the
    ``image_url`` content parts of its images, in field order."""
    if not image_fields or not isinstance(observation, dict):
        return prefix + _observation_text(observation), []
    parts: list[dict[str, Any]] = []
    shown = dict(observation)
    for name, value in observation.items():
        if name in image_fields and is_image_value(value):
            shown[name] = f"<image: {name}, attached>"
            parts.append({"type": "image_url", "image_url": {"url": value}})
    return prefix + _observation_text(shown), parts


_EARLIER_IMAGE = {"type": "text", "text": "(an earlier image, not sent again)"}


def _forget_images(messages: list[dict[str, Any]]) -> None:
    """Replace the image parts of earlier messages by a note (only the newest frame is sent)."""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(p.get("type") == "image_url" for p in content):
            message["content"] = [_EARLIER_IMAGE if p.get("type") == "image_url" else p for p in content]


class LLMPolicy:
    """``LLMPolicy(info, base_url="http://127.0.0.1:8001/v1", model="m")``; ``api_key`` optional."""

    def __init__(self, info: EnvInfo, *, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, temperature: float = 0.7, max_tokens: int = 512,
                 timeout_s: float = 60.0, system_prompt: str | None = None, logprobs: bool = False) -> None:
        if not base_url or not model:
            raise ConfigError("the llm policy needs --llm-base-url (an OpenAI-compatible endpoint, "
                              "e.g. http://127.0.0.1:8001/v1) and --llm-model.")
        self.name = f"llm:{model}"
        self.info, self.model, self.base_url = info, model, base_url.rstrip("/")
        self.temperature, self.max_tokens, self.timeout_s = temperature, max_tokens, timeout_s
        self.logprobs = logprobs
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.tools = tool_specs(info.tools) if info.mcp else []
        self.system_prompt = system_prompt or self._default_prompt()
        self._http: httpx.AsyncClient | None = None

    def _default_prompt(self) -> str:
        if self.tools:
            return "You act in an environment through its tools. Call exactly one tool per turn."
        schema = json.dumps(self.info.action_schema, separators=(",", ":"))
        return ("You act in an environment. Each turn you see an observation as JSON; answer with "
                f"exactly one JSON object, the action, matching this JSON schema: {schema}")

    async def _post(self, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The answer's message and the whole response."""
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout_s)
        response = await self._http.post(f"{self.base_url}/chat/completions", json=body, headers=self.headers)
        if response.status_code != 200:
            raise PolicyError(f"the LLM endpoint answered HTTP {response.status_code}: {response.text[:300]}")
        try:
            doc = response.json()
            message = doc["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise PolicyError(f"the LLM endpoint's answer is not a chat completion: {response.text[:300]}") from None
        return dict(message), doc

    async def act(self, observation: Any, ctx: EpisodeContext) -> Any:
        messages: list[dict[str, Any]] = ctx.state.setdefault("messages", [
            {"role": "system", "content": self.system_prompt}])
        pending = ctx.state.pop("pending_tool_call", None)
        if pending is not None:
            text, images = observation_content(observation, self.info.image_fields)
            messages.append({"role": "tool", "tool_call_id": pending, "content": text})
            if images:
                _forget_images(messages)
                messages.append({"role": "user", "content": [
                    {"type": "text", "text": "The images of the tool result:"}, *images]})
        else:
            prefix = f"Task: {json.dumps(ctx.task, default=str)}\n" if ctx.task and ctx.t == 0 else ""
            text, images = observation_content(observation, self.info.image_fields, prefix + "Observation: ")
            if images:
                _forget_images(messages)
                messages.append({"role": "user", "content": [{"type": "text", "text": text}, *images]})
            else:
                messages.append({"role": "user", "content": text})
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature,
                                "max_tokens": self.max_tokens}
        if self.tools:
            body["tools"] = self.tools
        if self.logprobs:
            body["logprobs"] = True
        message, doc = await self._post(body)
        info = step_info(doc)
        messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
        calls = message.get("tool_calls") or []
        if self.tools:
            if not calls:
                raise PolicyError(f"the model called no tool; it said: {str(message.get('content'))[:300]!r}")
            fn = calls[0].get("function") or {}
            try:
                arguments = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                raise PolicyError(f"tool call arguments are not JSON: {fn.get('arguments')!r}") from None
            ctx.state["pending_tool_call"] = calls[0].get("id", "call-0")
            return Decision({"type": "call_tool", "tool_name": fn.get("name"), "arguments": arguments}, info)
        return Decision(parse_json_action(str(message.get("content") or "")), info)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
