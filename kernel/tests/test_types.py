"""The observation envelope (spec §2.4) and reward rules (§11 B6)."""

from __future__ import annotations

import math

import pytest
from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from openenv.types import Action, Observation, State, http_observation_payload, observation_payload


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
