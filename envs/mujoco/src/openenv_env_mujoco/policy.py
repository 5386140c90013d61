"""Baselines for the MuJoCo env: a uniform random controller and a linear InvertedPendulum balancer.

Both read only the observation (its dict or model), as an agent would. The balancer is a hand-tuned
state feedback for ``InvertedPendulum-v5``, whose observation is (cart position, pole angle, cart
velocity, pole angular velocity): push the cart under the pole, ``u = x + 10 θ + ẋ + θ̇``, clipped
to the force bounds. It keeps the pole up for the whole episode from every seed tried (tested); a
random controller drops it within a few dozen steps. It is the manifest's oracle.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from openenv_env_mujoco.models import MujocoObservation

__all__ = ["BALANCER_GAINS", "pendulum_balancer", "random_policy"]

#: The balancer's gains on (x, θ, ẋ, θ̇).
BALANCER_GAINS = (1.0, 10.0, 1.0, 1.0)


def _data(obs: MujocoObservation | Mapping[str, Any]) -> Mapping[str, Any]:
    return obs.model_dump() if isinstance(obs, MujocoObservation) else obs


def random_policy(obs: MujocoObservation | Mapping[str, Any], rng: random.Random | None = None) -> dict[str, Any]:
    """Every actuator drawn uniformly within its bounds, as an action dict."""
    data, draw = _data(obs), rng or random
    return {"action": [draw.uniform(lo, hi) for lo, hi in zip(data["action_low"], data["action_high"], strict=True)]}


def pendulum_balancer(obs: MujocoObservation | Mapping[str, Any]) -> dict[str, Any]:
    """InvertedPendulum-v5: the linear feedback ``BALANCER_GAINS`` on the state, clipped to the bounds."""
    data = _data(obs)
    if data.get("env_id", "InvertedPendulum-v5") != "InvertedPendulum-v5":
        raise ValueError(f"pendulum_balancer plays InvertedPendulum-v5 only, this is {data.get('env_id')!r}; "
                         "use random_policy")
    force = sum(k * v for k, v in zip(BALANCER_GAINS, data["observation"], strict=True))
    low, high = data["action_low"][0], data["action_high"][0]
    return {"action": [min(high, max(low, force))]}
