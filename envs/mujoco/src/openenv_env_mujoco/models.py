"""Typed action, observation and state of the MuJoCo env."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["MujocoAction", "MujocoObservation", "MujocoState"]


class MujocoAction(Action):
    """One control vector: a number per actuator, inside the task's bounds.

    Its length and bounds depend on the task (the observation's ``action_low``/``action_high``);
    the env checks them and refuses a vector of the wrong length, out of bounds or not finite.
    """

    action: list[float] = Field(
        min_length=1, description="One number per actuator (action_names), each within [action_low, action_high]",
    )


class MujocoObservation(Observation):
    """What the agent sees after an action: the task's state vector, its action bounds, an optional image."""

    env_id: str = Field(description="The Gymnasium MuJoCo task being played, e.g. 'Hopper-v5'")
    observation: list[float] = Field(description="The task's observation vector (positions, velocities, ...)")
    action_names: list[str] = Field(default_factory=list, description="The actuators, in action order")
    action_low: list[float] = Field(default_factory=list, description="Lower bound of each action component")
    action_high: list[float] = Field(default_factory=list, description="Upper bound of each action component")
    legal_actions: list[list[float]] = Field(
        default_factory=list, description="A few valid actions (all zeros, then random vectors within the bounds, "
        "drawn from the episode's seed): what the kit's random policy picks from. Any vector within the bounds is "
        "accepted; empty once the episode is over",
    )
    image: str | None = Field(
        default=None, description="The scene rendered offscreen as a PNG data URL (data:image/png;base64,...), "
        "only when reset(image=True)",
    )
    info: dict[str, float] = Field(
        default_factory=dict, description="The task's own info: the parts of its reward (reward_forward, reward_ctrl, "
        "...) and positions it reports, as numbers",
    )
    episode_return: float = Field(default=0.0, description="Sum of rewards this episode")
    steps_left: int = Field(description="Agent steps left before truncation")
    terminated: bool = Field(default=False, description="True when the task reached a terminal state (a fall)")
    truncated: bool = Field(default=False, description="True when the episode ended by max_steps")


class MujocoState(State):
    """Episode id, step count, task, seed and return of the episode."""

    env_id: str = Field(default="", description="The Gymnasium MuJoCo task being played")
    seed: int | None = Field(default=None, description="The seed of the episode's initial state")
    episode_return: float = Field(default=0.0, description="Sum of rewards this episode")
    done: bool = Field(default=False, description="Whether the episode is over")
