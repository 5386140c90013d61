"""The observation envelope (docs/protocol.md §2.4) and reward rules (§11 B6)."""

from __future__ import annotations

import datetime
import enum
import math

import pytest
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_serializer
from pydantic import ValidationError as PydanticValidationError

from openenv.types import Action, Observation, State, http_observation_payload, observation_payload
from openenv.wire import dumps


class EchoObs(Observation):
    echoed_message: str
    message_length: int


class EchoAction(Action):
    message: str = Field(min_length=1)


def test_payload_matches_upstream_shape_with_metadata() -> None:
    obs = EchoObs(echoed_message="Hello", message_length=5, reward=0.5, metadata={"step": 1})
    assert observation_payload(obs) == {
        "observation": {"metadata": {"step": 1}, "echoed_message": "Hello", "message_length": 5},
        "reward": 0.5,
        "done": False,
        "metadata": {"step": 1},
    }
    # metadata comes first inside the observation, like upstream
    assert next(iter(observation_payload(obs)["observation"])) == "metadata"


def test_payload_omits_empty_top_level_metadata_and_keeps_integers() -> None:
    payload = observation_payload(EchoObs(echoed_message="x", message_length=1, reward=3, done=True))
    assert payload == {"observation": {"metadata": {}, "echoed_message": "x", "message_length": 1},
                       "reward": 3, "done": True}
    assert isinstance(payload["reward"], int)


def test_http_payload_coerces_reward_and_always_has_metadata() -> None:
    payload = http_observation_payload(EchoObs(echoed_message="x", message_length=1, reward=3))
    assert payload["reward"] == 3.0 and isinstance(payload["reward"], float)
    assert payload["metadata"] is None
    assert http_observation_payload(EchoObs(echoed_message="x", message_length=1))["reward"] is None


@pytest.mark.parametrize("bad", [True, False, math.nan, math.inf, -math.inf])
def test_boolean_and_non_finite_rewards_are_refused_at_construction(bad: object) -> None:
    with pytest.raises(PydanticValidationError) as info:
        EchoObs(echoed_message="x", message_length=1, reward=bad)
    text = str(info.value)
    assert ("boolean" in text) if isinstance(bad, bool) else ("Non-finite reward" in text)


def test_non_finite_reward_smuggled_past_validation_is_caught_when_serialised() -> None:
    obs = EchoObs.model_construct(echoed_message="x", message_length=1, reward=math.nan, done=False, metadata={})
    with pytest.raises(ValueError, match="Non-finite reward: nan"):
        observation_payload(obs)


def test_actions_reject_unknown_fields_and_state_allows_them() -> None:
    with pytest.raises(PydanticValidationError) as info:
        EchoAction(message="hi", bogus=1)  # type: ignore[call-arg]
    assert info.value.errors()[0]["type"] == "extra_forbidden"
    st = State(episode_id="e", step_count=2, score=7)  # type: ignore[call-arg]
    assert st.model_dump() == {"episode_id": "e", "step_count": 2, "score": 7}


# -- the plain-class fast path of observation_payload must say what model_dump says ---------------


class _Colour(enum.Enum):
    RED = "red"


class _Inner(BaseModel):
    x: int = 1


class _Rich(Observation):
    inner: _Inner = Field(default_factory=_Inner)
    items: list[_Inner] = Field(default_factory=list)
    colour: _Colour = _Colour.RED
    when: datetime.date = datetime.date(2026, 1, 2)
    tags: tuple[str, ...] = ("a",)


class _Serialized(Observation):
    value: int = 0

    @field_serializer("value")
    def _twice(self, value: int) -> int:
        return value * 2


class _Computed(Observation):
    value: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def double(self) -> int:
        return self.value * 2


class _Hidden(Observation):
    secret: str = Field(default="s", exclude=True)
    shown: str = "v"


class _Extra(Observation):
    model_config = ConfigDict(extra="allow")


def _slow_payload(obs: Observation) -> dict[str, object]:
    """observation_payload as it was before the fast path: model_dump, then the envelope."""
    body = obs.model_dump(exclude={"reward", "done"})
    observation = {"metadata": body.get("metadata") or {}}
    observation.update(body)
    payload: dict[str, object] = {"observation": observation, "reward": obs.reward, "done": obs.done}
    if body.get("metadata"):
        payload["metadata"] = body["metadata"]
    return payload


@pytest.mark.parametrize("obs", [
    EchoObs(echoed_message="x", message_length=1, reward=0.5, metadata={"k": [1, 2]}),
    _Rich(items=[_Inner(x=2)], reward=1, done=True),
    _Serialized(value=21),
    _Computed(value=2),
    _Hidden(),
    _Extra(surprise=[1, 2], reward=0.0),
    EchoObs.model_construct(echoed_message="only this"),  # unset fields: pydantic decides
], ids=["plain", "nested-enum-date-tuple", "field-serializer", "computed", "excluded", "extra", "constructed"])
def test_payload_encodes_exactly_like_model_dump(obs: Observation) -> None:
    assert dumps(observation_payload(obs)) == dumps(_slow_payload(obs))
