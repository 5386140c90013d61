"""Each session of a server scores with its own rubric state (``Rubric.for_session``)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from openenv.core.rubrics.trajectory import TrajectoryRubric
from openenv.errors import ConfigError
from openenv.rubric import Rubric
from openenv.sessions import SessionManager
from openenv_env_echo.env import EchoEnv
from openenv_rubrics.builtin import ExactMatch
from openenv_rubrics.compose import WeightedSum


class _Count(Rubric):
    """Scores the number of steps since the last reset: per-episode state, cleared by reset()."""

    high = 100.0

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.steps = 0

    def reset(self) -> None:
        self.steps = 0

    def evaluate(self, action: Any, observation: Any) -> float:
        self.steps += 1
        return float(self.steps)


async def _interleave(rubric: Rubric) -> list[float]:
    """A steps 3 times, B resets, A steps once more: A's four rewards."""
    manager = SessionManager(EchoEnv, max_sessions=2, rubric=rubric)
    try:
        a, b = await manager.open(), await manager.open()
        await manager.reset(a)
        rewards = [(await manager.step(a, {"message": "x"})).reward for _ in range(3)]
        await manager.reset(b)
        await manager.step(b, {"message": "y"})
        rewards.append((await manager.step(a, {"message": "x"})).reward)
        return rewards  # type: ignore[return-value]
    finally:
        await manager.shutdown()


def test_one_sessions_reset_never_clears_anothers_episode() -> None:
    assert asyncio.run(_interleave(_Count(name="count"))) == [1.0, 2.0, 3.0, 4.0]


def test_a_stateful_child_inside_a_composite_is_copied_per_session() -> None:
    rubric = WeightedSum([_Count(name="count"), ExactMatch(name="exact", expected="x", response="action.message")],
                         weights=[1.0, 0.0], name="total")
    assert asyncio.run(_interleave(rubric)) == [1.0, 2.0, 3.0, 4.0]


class _Steps(TrajectoryRubric):
    """Upstream-style trajectory rubric: the number of steps recorded since reset."""

    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        return float(len(trajectory))

    def forward(self, action: Any, observation: Any) -> float:
        super().forward(action, observation)
        return float(len(self._trajectory))

    def compute_step_rewards(self) -> list[float]:
        return [1.0] * len(self._trajectory)


def test_the_compatibility_layers_trajectory_rubric_is_per_session() -> None:
    assert asyncio.run(_interleave(_Steps())) == [1.0, 2.0, 3.0, 4.0]


def test_a_stateless_rubric_is_shared_and_a_stateful_one_is_not() -> None:
    async def run() -> None:
        shared = ExactMatch(expected="x", response="action.message")
        manager = SessionManager(EchoEnv, max_sessions=2, rubric=shared)
        a, b = await manager.open(), await manager.open()
        assert a.rubric is shared and b.rubric is shared
        await manager.shutdown()
        counting = _Count()
        manager = SessionManager(EchoEnv, max_sessions=2, rubric=counting)
        a, b = await manager.open(), await manager.open()
        assert a.rubric is not counting and b.rubric is not counting and a.rubric is not b.rubric
        assert counting.steps == 0 and type(a.rubric) is _Count
        await manager.shutdown()
        # A composite of stateless children is shared as is.
        total = WeightedSum([ExactMatch(name="e", expected="x", response="action.message")], weights=[1.0])
        manager = SessionManager(EchoEnv, max_sessions=2, rubric=total)
        assert (await manager.open()).rubric is total
        await manager.shutdown()
        # With a stateful child, the composite and that child are copied; a stateless one (a judge
        # with its client and cache) stays shared.
        exact = ExactMatch(name="e", expected="x", response="action.message")
        mixed = WeightedSum([_Count(name="count"), exact], weights=[1.0, 1.0])
        manager = SessionManager(EchoEnv, max_sessions=2, rubric=mixed)
        a = await manager.open()
        assert a.rubric is not mixed and a.rubric.children[0] is not mixed.children[0]
        assert a.rubric.children[1] is exact
        await manager.shutdown()

    asyncio.run(run())


class _Locked(_Count):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()  # cannot be deep-copied


def test_a_stateful_rubric_that_cannot_be_copied_fails_when_the_server_starts() -> None:
    with pytest.raises(ConfigError, match="Override for_session"):
        SessionManager(EchoEnv, max_sessions=2, rubric=_Locked())
