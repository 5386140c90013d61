"""The one step-keyword-argument rule (``openenv.sessions.StepKwargsPolicy``) on its own."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.sessions import StepKwargsPolicy
from openenv.types import Action, Observation


class _Act(Action):
    message: str = ""


class _VarKwEnv(Environment[_Act, Observation, Any]):
    def step(self, action: _Act, timeout_s: float | None = None, **kwargs: Any) -> Any:
        raise NotImplementedError


class _AsyncEnv(Environment[_Act, Observation, Any]):
    async def step_async(self, act: _Act, *, budget: int = 1) -> Any:
        raise NotImplementedError


class _PlainEnv(Environment[_Act, Observation, Any]):
    def step(self, action: _Act, temperature: float = 1.0) -> Any:
        raise NotImplementedError


def test_var_kwargs_pass_through_but_declared_ones_are_checked() -> None:
    check = StepKwargsPolicy(_VarKwEnv, is_async=False)
    assert check({"anything": [1], "timeout_s": "3"}) == {"anything": [1], "timeout_s": 3.0}
    with pytest.raises(ValidationError) as info:
        check({"timeout_s": "later"})
    assert info.value.errors[0]["loc"] == ["kwargs", "timeout_s"]


def test_the_async_signature_and_its_action_name_are_used() -> None:
    check = StepKwargsPolicy(_AsyncEnv, is_async=True)
    assert check({"budget": "4"}) == {"budget": 4}
    with pytest.raises(ValidationError) as info:
        check({"act": 1})
    assert info.value.errors[0]["loc"] == ["kwargs", "act"]


def test_without_env_class_everything_passes() -> None:
    check = StepKwargsPolicy(None, is_async=False)
    assert check({"x": 1}) == {"x": 1}


def test_unknown_names_are_refused_with_the_callers_location() -> None:
    check = StepKwargsPolicy(_PlainEnv, is_async=False)
    with pytest.raises(ValidationError) as info:
        check({"temprature": 0.5}, ("body",))
    assert [(e["type"], e["loc"]) for e in info.value.errors] == [("extra_forbidden", ["body", "temprature"])]


def test_upstream_step_fields_are_dropped_when_step_does_not_take_them() -> None:
    check = StepKwargsPolicy(_PlainEnv, is_async=False)
    assert check({"timeout_s": 5.0, "request_id": "r1", "temperature": "0.5"}) == {"temperature": 0.5}
    assert check({"timeout_s": 5.0}) == {}
    # ...but passed (and validated) when step declares them.
    assert StepKwargsPolicy(_VarKwEnv, is_async=False)({"timeout_s": "2"}) == {"timeout_s": 2.0}
