"""``openenv.core.rubrics``: upstream's rubric API (forward, hooks, children, compositions)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv.core import UnsupportedFeature
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Observation, State
from openenv.core.rubrics import (
    ExponentialDiscountingTrajectoryRubric,
    Gate,
    Rubric,
    RubricDict,
    RubricList,
    Sequential,
    TrajectoryRubric,
    WeightedSum,
)
from openenv.interfaces import Rubric as KernelRubric


class Const(Rubric):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def forward(self, action: Any, observation: Any) -> float:
        return self.value


class AsyncConst(Const):
    async def forward(self, action: Any, observation: Any) -> float:  # type: ignore[override]
        await asyncio.sleep(0)
        return self.value


def test_a_rubric_is_a_kernel_rubric_with_hooks_and_last_score() -> None:
    rubric = Const(0.25)
    assert isinstance(rubric, KernelRubric)
    seen: list[Any] = []
    rubric.register_forward_pre_hook(lambda r, a, o: seen.append(("pre", a)))
    rubric.register_forward_hook(lambda r, a, o, score: seen.append(("post", score)))
    assert rubric("act", "obs") == 0.25 and rubric.last_score == 0.25
    assert seen == [("pre", "act"), ("post", 0.25)]


def test_children_are_registered_by_assignment() -> None:
    class Parent(Rubric):
        def __init__(self) -> None:
            super().__init__()
            self.syntax = Const(1.0)
            self.tests = WeightedSum([Const(1.0), Const(0.0)], [0.5, 0.5])

        def forward(self, action: Any, observation: Any) -> float:
            return self.syntax(action, observation) * self.tests(action, observation)

    parent = Parent()
    assert [name for name, _ in parent.named_rubrics()] == ["syntax", "tests", "tests.rubric_0", "tests.rubric_1"]
    assert parent(None, None) == 0.5 and parent.get_rubric("tests.rubric_1").last_score == 0.0
    with pytest.raises(KeyError, match=r"Rubric path not found: tests\.nope"):
        parent.get_rubric("tests.nope")


def test_compositions() -> None:
    assert Sequential(Const(0.5), Const(0.9))(None, None) == 0.9
    assert Sequential(Const(0.0), Const(0.9))(None, None) == 0.0
    assert Gate(Const(0.4), threshold=0.5)(None, None) == 0.0
    assert Gate(Const(0.6), threshold=0.5)(None, None) == 0.6
    assert WeightedSum([Const(1.0), Const(0.5)], [0.25, 0.75])(None, None) == pytest.approx(0.625)
    with pytest.raises(ValueError, match=r"must sum to 1\.0"):
        WeightedSum([Const(1.0)], [0.5])
    games = RubricDict({"chess": Const(1.0), "go": Const(0.5)})
    assert games["go"](None, None) == 0.5 and "chess" in games and len(games) == 2
    listed = RubricList([Const(0.1)])
    listed.append(Const(0.2))
    assert [r(None, None) for r in listed] == [0.1, 0.2]


def test_async_children_make_the_composition_awaitable() -> None:
    composed = WeightedSum([Const(1.0), AsyncConst(0.5)], [0.5, 0.5])
    pending = composed(None, None)
    assert asyncio.iscoroutine(pending)
    assert asyncio.run(pending) == pytest.approx(0.75) and composed.last_score == pytest.approx(0.75)
    assert asyncio.run(Sequential(AsyncConst(0.0), Const(1.0))(None, None)) == 0.0
    assert asyncio.run(Gate(AsyncConst(0.7), threshold=0.5)(None, None)) == 0.7


def test_trajectory_rubrics() -> None:
    class WinLoss(ExponentialDiscountingTrajectoryRubric):
        def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
            return 1.0 if trajectory[-1][1].metadata.get("won") else 0.0

    rubric = WinLoss(gamma=0.5)
    assert rubric("a", Observation()) == 0.0
    assert rubric("b", Observation(done=True, metadata={"won": True})) == 1.0
    assert rubric.compute_step_rewards() == [0.5, 1.0]
    rubric.reset()
    assert rubric.trajectory == [] and rubric.state_dict() == {"intermediate_reward": 0.0, "gamma": 0.5}
    assert issubclass(WinLoss, TrajectoryRubric)
    with pytest.raises(ValueError, match="gamma"):
        WinLoss(gamma=2.0)


def test_env_helpers_apply_the_rubric_and_transform() -> None:
    class Scored(Environment):
        def __init__(self) -> None:
            super().__init__(rubric=Const(0.75), transform=lambda obs: obs.model_copy(update={"done": True}))

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
            self._reset_rubric()
            return Observation()

        def step(self, action: Any, timeout_s: float | None = None, **kw: Any) -> Observation:
            obs = Observation()
            obs.reward = self._apply_rubric(action, obs)
            return self._apply_transform(obs)

        @property
        def state(self) -> State:
            return State()

    env = Scored()
    env.reset()
    obs = env.step(None)
    assert (obs.reward, obs.done) == (0.75, True)
    assert asyncio.run(env._apply_rubric_async(None, obs)) == 0.75

    class NoRubric(Scored):
        def __init__(self) -> None:  # upstream envs often skip super().__init__()
            pass

    assert NoRubric()._apply_rubric(None, Observation()) == 0.0


def test_llm_judge_is_refused_with_the_alternative() -> None:
    from openenv.core.rubrics import LLMJudge  # importing works; building one fails (issue 32)

    with pytest.raises(UnsupportedFeature, match="async def forward"):
        LLMJudge()


# -- issue 32: upstream's documented async behaviour of the containers ----------------------------

from openenv.core import rubrics as _r  # noqa: E402

_Gate, _Rubric, _Sequential, _WeightedSum = _r.Gate, _r.Rubric, _r.Sequential, _r.WeightedSum


class _Const(_r.Rubric):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def forward(self, action: Any, observation: Any) -> float:
        return self.value


async def test_awaiting_a_sequential_of_sync_rubrics_works() -> None:
    assert await _Sequential(_Const(0.5), _Const(0.8))(None, None) == 0.8


def test_a_sequential_of_sync_rubrics_is_a_float_outside_a_loop() -> None:
    assert _Sequential(_Const(0.5), _Const(0.8))(None, None) == 0.8


async def test_async_pre_hooks_of_sequential_and_gate_run_before_the_children() -> None:
    seen: list[str] = []

    class Child(_Const):
        def forward(self, action: Any, observation: Any) -> float:
            seen.append("child")
            return self.value

    async def pre(rubric: Any, action: Any, observation: Any) -> None:
        await asyncio.sleep(0)
        seen.append(f"pre:{type(rubric).__name__}")

    seq, gate = _Sequential(Child(1.0)), _Gate(Child(0.9), threshold=0.5)
    seq.register_forward_pre_hook(pre)
    gate.register_forward_pre_hook(pre)
    assert await seq(None, None) == 1.0
    assert await gate(None, None) == 0.9
    assert seen == ["pre:Sequential", "child", "pre:Gate", "child"]


async def test_async_children_of_a_weighted_sum_run_concurrently() -> None:
    started = [asyncio.Event(), asyncio.Event()]

    class Waits(_r.Rubric):
        """Scores only once the *other* child has started: run one after another, it never ends."""

        def __init__(self, me: int, value: float) -> None:
            super().__init__()
            self.me, self.value = me, value

        async def forward(self, action: Any, observation: Any) -> float:
            started[self.me].set()
            await started[1 - self.me].wait()
            return self.value

    rubric = _WeightedSum([Waits(0, 1.0), Waits(1, 0.0), _Const(0.5)], [0.5, 0.25, 0.25])
    assert await asyncio.wait_for(rubric(None, None), timeout=30) == 0.625
