"""Core data types: actions, observations, state, step results, and the wire envelope.

``Image`` / ``ImageSpec`` (declared image fields of an observation) live in ``openenv.images``
and are re-exported here, beside the other field types an env's models use.

``observation_payload`` is the single place where an observation becomes the OpenEnv wire
envelope (docs/protocol.md §2.4); every transport calls it (or ``StepOutcome.payload``, the same
envelope for a step the server scored), none re-implements it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openenv.images import Image, ImageSpec

__all__ = [
    "Action",
    "REWARD_COMPONENTS_HEADER",
    "EnvironmentMetadata",
    "Image",
    "ImageSpec",
    "Observation",
    "State",
    "StepOutcome",
    "StepResult",
    "components_wanted",
    "http_observation_payload",
    "observation_payload",
    "with_reward_components",
]


class Action(BaseModel):
    """Base of every action. Unknown fields are rejected; ``metadata`` is free-form."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form action metadata")


_isfinite = math.isfinite


def _check_reward(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(
            "reward must be a number or None, not a boolean; use 1.0/0.0 (a boolean reward is "
            "ambiguous on the wire, docs/protocol.md §11 B6)"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"Non-finite reward: {value}")
    return value


class Observation(BaseModel):
    """Base of every observation: ``done``, ``reward`` (number or None), ``metadata``.

    A boolean or non-finite reward is refused when the observation is built, so it can never
    reach the wire as ``true`` or ``null`` (docs/protocol.md §11 B6).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    done: bool = Field(default=False, description="Whether the episode has terminated")
    reward: int | float | None = Field(default=None, description="Reward of the last action")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form metadata")

    @field_validator("reward", mode="before")
    @classmethod
    def _reward_is_finite_number(cls, value: Any) -> Any:
        # Runs for every observation built: the common cases answer without a further call.
        if value is None or type(value) is int or (type(value) is float and _isfinite(value)):
            return value
        return _check_reward(value)


class State(BaseModel):
    """Environment state. Extra keys are allowed and sent on the wire."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    episode_id: str | None = Field(default=None, description="Identifier of the current episode")
    step_count: int = Field(default=0, ge=0, description="Steps taken since the last reset")


class EnvironmentMetadata(BaseModel):
    """What ``GET /metadata`` returns."""

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


_ABSENT: Any = object()
ObsT = TypeVar("ObsT")


@dataclass
class StepResult(Generic[ObsT]):
    """What the client returns from ``reset`` and ``step``."""

    observation: ObsT
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = field(default=None)
    #: The server rubric's components (flat dotted names -> score); empty when the server applies none.
    reward_components: dict[str, float] = field(default_factory=dict)
    #: Rationales/errors behind the components (``{"rationales": {...}, "error": "..."}``), or None.
    reward_details: dict[str, Any] | None = field(default=None)


def with_reward_components(result: Any, payload: dict[str, Any]) -> Any:
    """Copy a reply's ``reward_components``/``reward_details`` onto ``result`` (a ``StepResult`` a
    client's ``_parse_result`` built); a reply without them leaves the defaults (empty, None)."""
    components = payload.get("reward_components")
    details = payload.get("reward_details")
    if components or details is not None:
        try:
            if components:
                result.reward_components = {str(k): float(v) for k, v in components.items()}
            if details is not None:
                result.reward_details = details
        except (AttributeError, TypeError, ValueError):  # a custom result type, or a malformed map
            pass
    return result


#: The request header (HTTP requests, the WebSocket upgrade) by which a client asks for the server
#: rubric's components in replies (docs/protocol.md §2.7). Upstream clients never send it, so their
#: frames and bodies stay exactly upstream's (upstream's HTTP response models forbid extra keys).
REWARD_COMPONENTS_HEADER = "openenv-reward-components"
_WANT_HEADER = REWARD_COMPONENTS_HEADER.encode()


def components_wanted(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request or WebSocket upgrade (its ASGI ``scope["headers"]``) asked for a server
    rubric's components with ``openenv-reward-components: 1|true|yes`` (docs/protocol.md §2.7)."""
    return any(name == _WANT_HEADER and value.strip().lower() in (b"1", b"true", b"yes")
               for name, value in headers)


@dataclass(slots=True)
class StepOutcome:
    """What one reset or step produced, as the session manager returns it to transports.

    ``reward`` is the reward of the reply: the server rubric's score when one scored the step,
    else the env's own (``observation.reward``, which is never overwritten here). ``components``
    are the rubric's components (``{}`` on a reset and on the steps of an episode-only rubric before
    ``done``), ``None`` when no server rubric applies; ``details`` its rationales/fallback error.
    """

    observation: Observation
    reward: int | float | None
    components: dict[str, float] | None = None
    details: dict[str, Any] | None = None

    def payload(self, components: bool = False) -> dict[str, Any]:
        """The ``/ws`` envelope (``observation_payload`` with this reward); ``components=True``
        (a client that asked, docs/protocol.md §2.7) adds ``reward_components``/``reward_details``."""
        payload = _envelope(self.observation, self.reward)
        if components and self.components is not None:
            payload["reward_components"] = self.components
            if self.details is not None:
                payload["reward_details"] = self.details
        return payload

    def http_payload(self, components: bool = False) -> dict[str, Any]:
        """The HTTP ``/reset``/``/step`` body (see ``http_observation_payload``)."""
        return _http(self.payload(components))

    def applied(self) -> Observation:
        """The observation with the reply's reward as its ``reward`` (for in-process callers of
        ``SessionManager.step``); an unscored outcome's observation is returned as it is."""
        obs = self.observation
        if self.components is not None and obs.reward != self.reward:
            obs.reward = self.reward
        return obs


_EXCLUDE_FROM_OBSERVATION = {"reward", "done"}
#: Per observation class, filled on first use: ``(names, in_order)`` when ``model_dump`` would
#: only copy ``__dict__`` — the body's field names (``metadata`` first), and whether the fields
#: minus reward and done are already in that order — else None.
_BODY_PLANS: dict[type, tuple[tuple[str, ...], bool] | None] = {}


def _body_plan(cls: type[Observation]) -> tuple[tuple[str, ...], bool] | None:
    """How to read the observation body of ``cls`` straight from an instance (None: it can't be).

    Plain: no field or model serializers, no computed fields, no excluded fields, no extras.
    Anything else (and any class pydantic is not finished building) takes ``model_dump``.
    """
    plan: tuple[tuple[str, ...], bool] | None = None
    try:
        decorators = cls.__pydantic_decorators__
        fields = cls.model_fields
        plain = (
            cls.__pydantic_complete__
            and not decorators.field_serializers
            and not decorators.model_serializers
            and not cls.__pydantic_computed_fields__
            and cls.model_config.get("extra") != "allow"
            and not any(f.exclude or getattr(f, "exclude_if", None) is not None for f in fields.values())
        )
        if plain:
            rest = [n for n in fields if n not in _EXCLUDE_FROM_OBSERVATION and n != "metadata"]
            names = ("metadata", *rest) if "metadata" in fields else tuple(rest)
            in_order = {"reward", "done"} <= fields.keys() and names == tuple(
                n for n in fields if n not in _EXCLUDE_FROM_OBSERVATION)
            plan = (names, in_order)
    except AttributeError:  # not a pydantic model class after all
        plan = None
    _BODY_PLANS[cls] = plan
    return plan


def observation_payload(obs: Observation) -> dict[str, Any]:
    """The wire envelope of an observation (docs/protocol.md §2.4), as used on ``/ws``.

    ``observation`` holds every field but ``reward``/``done`` (``metadata`` first); ``reward`` and
    ``done`` are top level; a top-level copy of ``metadata`` is added only when non-empty (a
    server rubric's components travel in ``StepOutcome.payload``). Raises ``ValueError`` for a
    non-finite reward that slipped past validation (e.g. set after
    construction without ``validate_assignment``).

    The per-step hot path: for a plain observation class (see ``_body_plan``) the body is
    read straight from the instance instead of through ``model_dump``, which gives the same
    values; the wire encoder turns nested models, enums, dates and numpy values into JSON the same
    way in both cases. (One difference: a nested model field holding a *subclass* instance is
    encoded with the subclass's fields, where ``model_dump`` would use the declared class's.)
    """
    return _envelope(obs, obs.reward)


def _envelope(obs: Observation, reward: Any) -> dict[str, Any]:
    plan = _BODY_PLANS.get(type(obs), _ABSENT)
    if plan is _ABSENT:
        plan = _body_plan(type(obs))
    body: dict[str, Any] | None = None
    if plan is not None:
        names, in_order = plan
        values = obs.__dict__
        if in_order and len(values) == len(names) + 2:
            # Every field set, declared with metadata first (the base class's order): the body is
            # the instance's dict minus reward and done, copied in C.
            body = values.copy()
            del body["reward"], body["done"]
        else:
            try:
                body = {name: values[name] for name in names}
            except KeyError:  # a field left unset (model_construct): let pydantic decide
                body = None
    if body is None:
        dumped = obs.model_dump(exclude=_EXCLUDE_FROM_OBSERVATION)
        # model_dump keeps declaration order, and the base class declares metadata last; upstream
        # clients do not care about key order but humans reading frames do, so put it first.
        meta = dumped.get("metadata")
        body = {"metadata": meta if meta is not None else {}}
        body.update(dumped)
    if reward is not None and (type(reward) is not float or not _isfinite(reward)) and type(reward) is not int:
        _check_reward(reward)
    meta = body.get("metadata")
    if meta is None and "metadata" in body:
        body["metadata"] = {}
    payload: dict[str, Any] = {"observation": body, "reward": reward, "done": obs.done}
    if meta:
        payload["metadata"] = meta
    return payload


def http_observation_payload(obs: Observation) -> dict[str, Any]:
    """The HTTP ``/reset``/``/step`` body (docs/protocol.md §2.4): float-or-null reward, ``metadata`` always present."""
    return _http(observation_payload(obs))


def _http(payload: dict[str, Any]) -> dict[str, Any]:
    reward = payload["reward"]
    payload["reward"] = None if reward is None else float(reward)
    payload.setdefault("metadata", None)
    return payload
