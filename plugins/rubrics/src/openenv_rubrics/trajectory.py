"""Trajectory rubrics: one score for a whole episode."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any

from openenv.errors import ConfigError, RuleViolation
from openenv.rubric import Rubric, RubricError, RubricResult, Step
from openenv.rubric_compose import discounted_return
from openenv_rubrics.compose import ChildSpec, _resolve

__all__ = ["DiscountedReturn"]


class DiscountedReturn(Rubric):
    """``sum(gamma**t * r_t)`` over an episode's steps (episode-only rubric).

    ``r_t`` is ``rubric``'s score of step ``t`` when a rubric is given, else the reward stored in
    the step (``Step.reward``; a missing one is a fault). With ``normalize`` the return is divided
    by ``sum(gamma**t)`` (a discounted mean, in the per-step range). The declared range follows
    from the per-step range (``reward_low``/``reward_high`` when there is no rubric) and, when
    ``gamma == 1`` and not normalised, from ``horizon`` (the longest episode allowed).
    """

    def __init__(self, rubric: ChildSpec | None = None, *, gamma: float = 1.0, normalize: bool = False,
                 horizon: int | None = None, reward_low: float = 0.0, reward_high: float = 1.0,
                 **base: Any) -> None:
        owner = base.get("name") or "discounted_return"
        if not 0.0 < gamma <= 1.0:
            raise ConfigError(f"rubric '{owner}': gamma must be in (0, 1], got {gamma}.")
        if horizon is not None and horizon < 1:
            raise ConfigError(f"rubric '{owner}': horizon must be >= 1, got {horizon}.")
        self.child: Rubric | None = None if rubric is None else _resolve(owner, [rubric])[0][0]
        if self.child is not None and not self.child.per_step:
            raise ConfigError(f"rubric '{owner}': its rubric '{self.child.name}' must score single steps.")
        self.gamma, self.normalize, self.horizon = float(gamma), normalize, horizon
        lo, hi = (self.child.low, self.child.high) if self.child else (float(reward_low), float(reward_high))
        self._step_range = (lo, hi)
        if not normalize:
            if horizon is not None:
                mass = sum(gamma**t for t in range(horizon))
            elif gamma < 1.0:
                mass = 1.0 / (1.0 - gamma)
            else:
                mass = math.inf
            lo = lo * mass if lo < 0 else lo
            hi = hi * mass if hi > 0 else hi
        base.setdefault("low", lo)
        base.setdefault("high", hi)
        super().__init__(**base)
        self.is_async = bool(self.child and self.child.is_async)
        self.per_step = False

    def reset(self) -> None:
        if self.child is not None:
            self.child.reset()

    def keeps_episode_state(self) -> bool:
        return self.child is not None and self.child.keeps_episode_state()

    def for_session(self) -> Rubric:
        if self.child is None or not self.child.keeps_episode_state():
            return self
        clone = copy.copy(self)
        clone.child = self.child.for_session()
        return clone

    def _rewards_from_steps(self, steps: Sequence[Step]) -> list[float]:
        rewards: list[float] = []
        lo, hi = self._step_range
        for t, step in enumerate(steps):
            r = step.reward
            if not isinstance(r, int | float) or isinstance(r, bool) or not lo <= r <= hi:
                raise RubricError(self.name, f"step {t} has reward {r!r}; expected a number in [{lo}, {hi}] "
                                             "(or give a rubric to score the steps).")
            rewards.append(float(r))
        return rewards

    def _fold(self, rewards: list[float]) -> RubricResult:
        if not rewards:
            raise RubricError(self.name, "cannot score an empty episode.")
        if self.horizon is not None and len(rewards) > self.horizon:
            raise RubricError(self.name, f"episode has {len(rewards)} steps, more than horizon={self.horizon}.")
        total = discounted_return(rewards, self.gamma, normalize=self.normalize)
        comps = {"steps": float(len(rewards)), "undiscounted": math.fsum(rewards)}
        return RubricResult(total, comps)

    def evaluate_episode(self, steps: Sequence[Step]) -> RubricResult:
        if self.is_async:
            raise RuleViolation(f"rubric '{self.name}' has an async rubric: call `await rubric.ascore_episode(steps)`.")
        if self.child is None:
            return self._fold(self._rewards_from_steps(steps))
        return self._fold([self.child.score(s.action, s.observation).score for s in steps])

    async def ascore_episode(self, steps: Sequence[Step]) -> RubricResult:
        if self.child is None or not self.child.is_async:
            return self.score_episode(steps)
        try:
            rewards = [(await self.child.ascore(s.action, s.observation)).score for s in steps]
            value = self._fold(rewards)
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)
