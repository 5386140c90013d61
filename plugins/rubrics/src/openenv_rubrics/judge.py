"""An LLM judge over any OpenAI-compatible chat-completions endpoint.

The judge sends one chat request per step and expects the assistant's message to be **exactly one
JSON object** ``{"score": <number on the declared scale>, "rationale": "<text>"}`` (optionally in a
single fenced code block). Anything else — prose, ``"8/10"``, a score given as a string, a score
off the scale, two objects — is refused with a ``RubricError`` (or the rubric's declared fallback);
it never becomes a reward. A score on ``scale=[lo, hi]`` is normalised explicitly to the rubric's
range: ``low + (score - lo) / (hi - lo) * (high - low)``.

Requests are retried with exponential backoff (``backoff * 2**attempt``, capped by
``max_backoff``; longer when the server's ``Retry-After`` asks, still capped) on timeouts,
connection errors, HTTP 429 and 5xx; other HTTP errors fail at once. At most ``max_concurrency``
requests are in flight per judge; identical requests share one answer (a bounded LRU cache of
successful judgements, and one in-flight request per key).

Configuration: ``base_url`` (e.g. ``http://127.0.0.1:8080/v1``; ``/chat/completions`` is
appended), ``model`` and ``api_key`` come from the config or from ``OPENENV_JUDGE_BASE_URL``,
``OPENENV_JUDGE_MODEL`` and ``OPENENV_JUDGE_API_KEY``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from openenv.errors import ConfigError
from openenv.rubric import AsyncRubric, RubricError, RubricResult
from openenv_rubrics.fields import FieldPath

__all__ = ["DEFAULT_SYSTEM_PROMPT", "LLMJudge", "parse_judgement"]

DEFAULT_SYSTEM_PROMPT = (
    "You grade the answer of an AI agent. Reply with exactly one JSON object and nothing else: "
    '{{"score": <a number from {lo} to {hi}>, "rationale": "<one or two sentences>"}}. '
    "Higher is better."
)
DEFAULT_PROMPT = "{question_block}{reference_block}Answer to grade:\n{response}"

_FENCE = re.compile(r"```(?:json)?[ \t]*\n?(.*?)\n?[ \t]*```", re.DOTALL)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"duplicate keys {dupes}")
    return dict(pairs)


def parse_judgement(content: str, scale: tuple[float, float]) -> tuple[float, str | None]:
    """Parse a judge's reply into ``(raw score on scale, rationale)``; raise ``ValueError`` if ambiguous."""
    text = content.strip()
    if text.startswith("```"):
        match = _FENCE.fullmatch(text)
        if match is None:
            raise ValueError("a code fence that does not wrap the whole reply")
        text = match.group(1).strip()
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates)
    except (json.JSONDecodeError, ValueError) as exc:
        raise ValueError(f"not a single JSON object ({exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"a JSON {type(obj).__name__}, not an object")
    if "score" not in obj:
        raise ValueError("no 'score' key")
    score = obj["score"]
    if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
        raise ValueError(f"'score' is {score!r}, not a finite number")
    lo, hi = scale
    if not lo <= score <= hi:
        raise ValueError(f"'score' {score} is off the scale [{lo}, {hi}]")
    rationale = obj.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise ValueError(f"'rationale' is {type(rationale).__name__}, not a string")
    return float(score), rationale


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


class LLMJudge(AsyncRubric):
    """Score a step by asking an LLM (see the module docstring for the protocol and policies)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        prompt: str | None = None,
        system: str | None = None,
        response: str = "action",
        reference: str | None = None,
        question: str | None = None,
        scale: Sequence[float] = (0.0, 1.0),
        temperature: float = 0.0,
        max_tokens: int = 512,
        json_mode: bool = True,
        request_timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_concurrency: int = 8,
        cache_size: int = 1024,
        **base: Any,
    ) -> None:
        super().__init__(**base)
        self.base_url = (base_url or os.environ.get("OPENENV_JUDGE_BASE_URL") or "").rstrip("/")
        self.model = model or os.environ.get("OPENENV_JUDGE_MODEL") or ""
        self.api_key = api_key or os.environ.get("OPENENV_JUDGE_API_KEY") or None
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"rubric '{self.name}': set base_url (or OPENENV_JUDGE_BASE_URL) to the "
                              "endpoint's http(s) URL, e.g. http://127.0.0.1:8080/v1.")
        if not self.model:
            raise ConfigError(f"rubric '{self.name}': set model (or OPENENV_JUDGE_MODEL).")
        if len(scale) != 2 or not float(scale[0]) < float(scale[1]):
            raise ConfigError(f"rubric '{self.name}': scale must be [low, high] with low < high, got {scale!r}.")
        self.scale = (float(scale[0]), float(scale[1]))
        for label, value in (("max_retries", max_retries), ("max_concurrency", max_concurrency - 1),
                             ("cache_size", cache_size)):
            if not isinstance(value, int) or value < 0:
                raise ConfigError(f"rubric '{self.name}': {label} must be a non-negative integer "
                                  f"(max_concurrency >= 1).")
        if not request_timeout > 0 or backoff < 0 or max_backoff < 0:
            raise ConfigError(f"rubric '{self.name}': request_timeout must be > 0, backoff and max_backoff >= 0.")
        self.response = FieldPath(response, owner=self.name)
        self.reference = None if reference is None else FieldPath(reference, owner=self.name)
        self.question = None if question is None else FieldPath(question, owner=self.name)
        self.prompt = prompt or DEFAULT_PROMPT
        for placeholder, path in (("{reference}", self.reference), ("{question}", self.question)):
            if placeholder in self.prompt and path is None:
                raise ConfigError(f"rubric '{self.name}': the prompt uses {placeholder} but no "
                                  f"{placeholder.strip('{}')}=<field path> is configured.")
        self.system = system if system is not None else DEFAULT_SYSTEM_PROMPT.format(
            lo=_fmt(self.scale[0]), hi=_fmt(self.scale[1]))
        self.temperature, self.max_tokens, self.json_mode = float(temperature), int(max_tokens), json_mode
        self.request_timeout, self.max_retries = float(request_timeout), max_retries
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.max_concurrency, self.cache_size = max_concurrency, cache_size
        self.url = f"{self.base_url}/chat/completions"
        self._cache: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None
        self._inflight: dict[str, asyncio.Future[tuple[float, str | None]]] = {}
        #: Counters: HTTP attempts sent, cache hits, retries.
        self.stats = {"requests": 0, "cache_hits": 0, "retries": 0}

    # -- request building -------------------------------------------------------------------------

    def _text(self, path: FieldPath, action: Any, observation: Any) -> str:
        value = path.get(self.name, action, observation)
        if isinstance(value, str):
            return value
        if isinstance(value, int | float | bool | list | dict) or value is None:
            return json.dumps(value, sort_keys=True)
        raise RubricError(self.name, f"field '{path.text}' is {type(value).__name__}; expected text or JSON data.")

    def request_body(self, action: Any, observation: Any) -> dict[str, Any]:
        """The chat-completions request body for one step (also the cache key's input)."""
        parts = {"response": self._text(self.response, action, observation), "reference": "", "question": "",
                 "reference_block": "", "question_block": ""}
        if self.reference is not None:
            parts["reference"] = self._text(self.reference, action, observation)
            parts["reference_block"] = f"Reference answer:\n{parts['reference']}\n\n"
        if self.question is not None:
            parts["question"] = self._text(self.question, action, observation)
            parts["question_block"] = f"Task:\n{parts['question']}\n\n"
        user = self.prompt
        for key in ("question_block", "reference_block", "question", "reference", "response"):
            user = user.replace("{" + key + "}", parts[key])
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": self.system}, {"role": "user", "content": user}],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    # -- scoring ----------------------------------------------------------------------------------

    async def aevaluate(self, action: Any, observation: Any) -> RubricResult:
        body = self.request_body(action, observation)
        key = hashlib.sha256(json.dumps([self.url, body], sort_keys=True).encode()).hexdigest()
        self._bind_loop()
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.stats["cache_hits"] += 1
            return self._result(*hit)
        pending = self._inflight.get(key)
        if pending is not None:
            self.stats["cache_hits"] += 1
            return self._result(*await asyncio.shield(pending))
        future: asyncio.Future[tuple[float, str | None]] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            answer = await self._ask(body)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # mark retrieved: waiters, if any, re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)
        future.set_result(answer)
        if self.cache_size:
            self._cache[key] = answer
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return self._result(*answer)

    def _result(self, raw: float, rationale: str | None) -> RubricResult:
        lo, hi = self.scale
        score = self.low + (raw - lo) / (hi - lo) * (self.high - self.low)
        return RubricResult(min(self.high, max(self.low, score)), {"raw": raw}, rationale=rationale)

    def _bind_loop(self) -> None:
        """HTTP client and semaphore belong to one event loop: make them for the running one."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        import httpx

        self._loop = loop
        self._client = httpx.AsyncClient(
            timeout=self.request_timeout,
            limits=httpx.Limits(max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency),
        )
        self._sem = asyncio.Semaphore(self.max_concurrency)
        self._inflight = {}

    async def aclose(self) -> None:
        """Close the HTTP client (its connections) of the current event loop."""
        if self._client is not None and self._loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client, self._loop = None, None

    async def _ask(self, body: dict[str, Any]) -> tuple[float, str | None]:
        last = "no attempt made"
        for attempt in range(self.max_retries + 1):
            try:
                return await self._attempt(body)
            except _Retryable as exc:
                last = str(exc)
                if attempt == self.max_retries:
                    break
                delay = min(self.max_backoff, self.backoff * 2**attempt)
                if exc.retry_after is not None:  # the server knows best, within our cap
                    delay = min(self.max_backoff, max(delay, exc.retry_after))
                self.stats["retries"] += 1
                await asyncio.sleep(delay)
        raise RubricError(self.name, f"judge endpoint {self.url} failed after {self.max_retries + 1} "
                                     f"attempt(s); last: {last}.")

    async def _attempt(self, body: dict[str, Any]) -> tuple[float, str | None]:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        assert self._sem is not None
        async with self._sem:
            self.stats["requests"] += 1
            try:
                resp = await self._client.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException:
                raise _Retryable(f"no answer within {self.request_timeout} s") from None
            except httpx.TransportError as exc:
                raise _Retryable(f"could not reach the endpoint ({type(exc).__name__}: {exc})") from None
        code = resp.status_code
        if code == 429 or code >= 500:
            raise _Retryable(f"HTTP {code}: {resp.text[:200]}", _retry_after(resp.headers.get("retry-after")))
        if code != 200:
            raise RubricError(self.name, f"judge endpoint {self.url} answered HTTP {code}: {resp.text[:300]} "
                                         "(check base_url, model and api_key).")
        try:
            content = resp.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise RubricError(self.name, "judge endpoint's reply is not a chat completion "
                                         f"(no choices[0].message.content): {resp.text[:300]}") from None
        if not isinstance(content, str):
            raise RubricError(self.name, f"judge's message content is {type(content).__name__}, not text.")
        try:
            return parse_judgement(content, self.scale)
        except ValueError as exc:
            raise RubricError(self.name, f"refused the judge's answer: {exc}. Expected exactly "
                                         '{"score": <number in ' f"[{_fmt(self.scale[0])}, {_fmt(self.scale[1])}]>, "
                                         f'"rationale": "..."}}; got {content[:200]!r}.') from None

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        doc.update(url=self.url, model=self.model, scale=list(self.scale), max_concurrency=self.max_concurrency)
        return doc


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 60 else None


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)
