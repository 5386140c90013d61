"""Rules enforced when an environment is defined or prepared for serving (never later)."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.env import Environment, check_factory, env_traits
from openenv.errors import RuleViolation
from openenv.types import Action, Observation, State


class MoveAction(Action):
    direction: str


class PosObservation(Observation):
    x: int = 0


class SoloEnv(Environment[MoveAction, PosObservation, State]):
    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id="e", step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> PosObservation:
        return PosObservation()

    def step(self, action: MoveAction, timeout_s: float | None = None, **kw: Any) -> PosObservation:
        return PosObservation(x=1)

    @property
    def state(self) -> State:
        return self._state


class SharedEnv(SoloEnv):
    SUPPORTS_CONCURRENT_SESSIONS = True


def test_generic_parameters_fill_the_declared_types() -> None:
    assert SoloEnv.action_type is MoveAction
    assert SoloEnv.observation_type is PosObservation
    assert SoloEnv.state_type is State
    assert SoloEnv().state.episode_id == "e"


def test_instance_is_refused_with_the_way_out() -> None:
    with pytest.raises(RuleViolation) as excinfo:
        check_factory(SoloEnv(), max_sessions=1)
    message = str(excinfo.value)
    assert message.startswith("env must be a callable (class or factory function), got ")
    assert "SoloEnv" in message and "not an instance" in message
    assert isinstance(excinfo.value, TypeError)  # upstream raised TypeError here: same catch works


def test_non_callable_is_refused() -> None:
    with pytest.raises(RuleViolation, match="env must be a callable"):
        check_factory("echo", max_sessions=1)


def test_many_sessions_need_a_concurrent_env_with_upstreams_message() -> None:
    with pytest.raises(RuleViolation) as excinfo:
        check_factory(SoloEnv, max_sessions=4)
    assert str(excinfo.value).startswith(
        "Environment 'SoloEnv' is not marked as SUPPORTS_CONCURRENT_SESSIONS. "
        "Cannot run with max_concurrent_envs=4. "
    )
    assert "SUPPORTS_CONCURRENT_SESSIONS = True" in str(excinfo.value)


def test_registered_name_is_used_in_the_message() -> None:
    with pytest.raises(RuleViolation, match=r"^Environment 'solo' is not marked"):
        check_factory(SoloEnv, max_sessions=2, name="solo")


def test_one_session_is_always_fine_and_concurrent_envs_take_many() -> None:
    assert check_factory(SoloEnv, max_sessions=1) is SoloEnv
    assert check_factory(SharedEnv, max_sessions=64) is SharedEnv


def test_zero_sessions_is_refused() -> None:
    with pytest.raises(RuleViolation, match="max_sessions must be at least 1, got 0"):
        check_factory(SharedEnv, max_sessions=0)


def test_factory_traits_come_from_its_return_annotation_or_attribute() -> None:
    def annotated() -> SharedEnv:
        return SharedEnv()

    def plain():  # type: ignore[no-untyped-def]
        return SharedEnv()

    assert check_factory(annotated, max_sessions=3) is annotated
    with pytest.raises(RuleViolation, match="not marked as SUPPORTS_CONCURRENT_SESSIONS"):
        check_factory(plain, max_sessions=3)
    plain.SUPPORTS_CONCURRENT_SESSIONS = True  # type: ignore[attr-defined]
    assert check_factory(plain, max_sessions=3) is plain
    assert env_traits(annotated)["SUPPORTS_CONCURRENT_SESSIONS"] is True


def test_state_as_a_method_is_refused_at_class_creation() -> None:
    with pytest.raises(RuleViolation) as excinfo:

        class BadState(Environment):  # type: ignore[type-arg]
            def state(self) -> State:  # type: ignore[override]
                return State()

    message = str(excinfo.value)
    assert "BadState.state must be a property, not a method" in message
    assert "@property" in message


@pytest.mark.parametrize("name", ["reset", "step", "close"])
def test_control_names_must_stay_methods(name: str) -> None:
    with pytest.raises(RuleViolation, match=rf"\.{name} must be a method"):
        type("Shadowing", (Environment,), {name: 3})


def test_missing_protocol_methods_say_what_to_implement() -> None:
    class Empty(Environment):  # type: ignore[type-arg]
        pass

    env = Empty()
    with pytest.raises(NotImplementedError, match="implements neither reset nor reset_async"):
        env.reset()
    with pytest.raises(NotImplementedError, match="does not implement the state property"):
        _ = env.state
