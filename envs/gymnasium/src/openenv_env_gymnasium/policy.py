"""Baselines for the Gymnasium env, used by the tests to reach each env's best return.

* ``TabularPlanner``: value iteration on the transition table (``env.unwrapped.P``) that the
  toy-text envs publish (FrozenLake, Taxi, CliffWalking); ``act(obs)`` is the optimal action.
* ``cartpole_action(obs)``: a hand-tuned linear controller that balances CartPole to its time limit.
* ``oracle(obs)``: the manifest's ``oracle`` (an observation dict in, an action dict out): the
  planner for a toy-text id (made with its default kwargs, as ``openenv validate`` serves it), the
  controller for CartPole.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium

from openenv_env_gymnasium.models import GymObservation

__all__ = ["TabularPlanner", "cartpole_action", "oracle"]


class TabularPlanner:
    """Optimal actions for a discrete env with a published transition table ``P[s][a]``."""

    def __init__(self, env_id: str, make_kwargs: dict[str, Any] | None = None, gamma: float = 0.99,
                 sweeps: int = 1000) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = gymnasium.make(env_id, **(make_kwargs or {}))
        table: dict[int, dict[int, list[tuple[float, int, float, bool]]]] = getattr(env.unwrapped, "P", None) or {}
        if not table:
            raise ValueError(f"{env_id} publishes no transition table (env.unwrapped.P); TabularPlanner needs one")
        env.close()
        self.table, self.gamma = table, gamma
        values = [0.0] * len(table)
        for _ in range(sweeps):
            delta = 0.0
            for s in table:
                best = max(self._q(values, s, a) for a in table[s])
                delta = max(delta, abs(best - values[s]))
                values[s] = best
            if delta < 1e-9:
                break
        self.values = values

    def _q(self, values: list[float], s: int, a: int) -> float:
        return sum(p * (r + (0.0 if done else self.gamma * values[n])) for p, n, r, done in self.table[s][a])

    def act(self, obs: GymObservation | Mapping[str, Any]) -> int:
        s = int(obs["observation"] if isinstance(obs, Mapping) else obs.observation)
        return max(self.table[s], key=lambda a: (self._q(self.values, s, a), -a))


def cartpole_action(obs: GymObservation | Mapping[str, Any]) -> int:
    """Push right (1) when the pole leans or falls right, taking cart drift into account."""
    x, x_dot, theta, theta_dot = obs["observation"] if isinstance(obs, Mapping) else obs.observation
    return 1 if theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0 else 0


@functools.lru_cache(maxsize=8)
def _planner(env_id: str) -> TabularPlanner:
    return TabularPlanner(env_id)


def oracle(obs: GymObservation | Mapping[str, Any]) -> dict[str, Any]:
    """The best baseline for the observation's env id, as an action dict (``{"action": ...}``)."""
    env_id = str(obs["env_id"] if isinstance(obs, Mapping) else obs.env_id)
    if env_id.startswith("CartPole-"):
        return {"action": cartpole_action(obs)}
    try:
        planner = _planner(env_id)
    except ValueError:
        raise ValueError(f"no baseline for {env_id}: the oracle plays the toy-text ids with a transition "
                         "table (FrozenLake, Taxi, CliffWalking) and CartPole") from None
    return {"action": planner.act(obs)}
