"""The runtime checks of ``openenv validate``: play the env in-process and check what it did.

Random and oracle episodes, rewards inside the declared range, seeded determinism, the state's
step count, and the reset/step time budgets. Each is a ``Report.run`` row like the static checks
in ``openenv.cli._validate_core``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv.cli._validate_core import Check, CheckFailed, NotApplicable, Report, Target, env_class
from openenv.manifest import Manifest
from openenv.testing.env_contract import without_fields

if TYPE_CHECKING:
    from openenv.env import Environment

__all__ = ["Episode", "episode", "runtime_checks"]


@dataclass
class Episode:
    rewards: list[float] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    done: bool = False
    max_step_s: float = 0.0
    reset_s: float = 0.0
    step_counts: list[int] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.rewards)


def _dump(obs: Any) -> Any:
    return obs.model_dump(mode="json") if hasattr(obs, "model_dump") else obs


def episode(factory: Callable[[], Any], choose: Callable[[Any], dict[str, Any]], *, seed: int,
            max_steps: int) -> Episode:
    """Play one episode in-process; ``choose(observation_dict) -> action dict``."""
    env = factory()
    result = Episode()
    try:
        start = time.perf_counter()
        obs = env.reset(seed=seed)
        result.reset_s = time.perf_counter() - start
        result.observations.append(_dump(obs))
        for _ in range(max_steps):
            action = env.action_type.model_validate(choose(_dump(obs)))
            start = time.perf_counter()
            obs = env.step(action)
            result.max_step_s = max(result.max_step_s, time.perf_counter() - start)
            result.observations.append(_dump(obs))
            result.rewards.append(float(obs.reward) if obs.reward is not None else 0.0)
            result.step_counts.append(env.state.step_count)
            if obs.done:
                result.done = True
                break
    finally:
        env.close()
    return result


def _random_chooser(cls: type[Environment[Any, Any, Any]], seed: int) -> Callable[[Any], dict[str, Any]]:
    from openenv.cli.run_cmd import Policy

    policy = Policy("random", cls.action_type.model_json_schema(), seed)
    return policy.act


def runtime_checks(report: Report, target: Target, *, episodes: int = 3) -> None:
    """Play the env in-process: random and oracle episodes, rewards, seeding, state, budgets."""
    if target.env is None:
        reason = "the entry point did not load (see entry_point)"
        for name in ("random_episodes", "reward_in_range", "oracle", "seeded_determinism",
                     "state_consistent", "time_budget"):
            report.checks.append(Check(name, "n/a", reason))
        return
    cls = env_class(target)
    manifest = target.manifest or Manifest(name=target.label)
    played: list[Episode] = []

    def random_episodes() -> str:
        for k in range(episodes):
            try:
                played.append(episode(target.env, _random_chooser(cls, k), seed=k,
                                      max_steps=manifest.max_episode_steps))
            except Exception as exc:
                raise CheckFailed(f"episode {k} (seed {k}) raised {type(exc).__name__}: {exc}",
                                  "Fix reset/step so they never raise on a valid action; refuse bad "
                                  "input through the action type's field constraints.") from None
        steps = sum(len(e.rewards) for e in played)
        return f"{episodes} episodes, {steps} steps, mean return {sum(e.total for e in played) / episodes:.3g}"

    if not report.run("random_episodes", random_episodes):
        played.clear()

    oracle_played: list[Episode] = []
    report.run("oracle", lambda: _oracle(target, manifest, played, episodes, oracle_played))

    def reward_in_range() -> str:
        every = played + oracle_played
        if not every:
            raise NotApplicable("no episode was played (see random_episodes)")
        if manifest.reward_range is None:
            raise CheckFailed("no reward_range declared to check against", "Add `reward_range: [low, high]`.")
        low, high = manifest.reward_range
        bad = [r for e in every for r in e.rewards if not (math.isfinite(r) and low <= r <= high)]
        if bad:
            raise CheckFailed(f"rewards {bad[:5]} lie outside the declared range [{low}, {high}]",
                              "Widen reward_range in openenv.yaml, or fix the env's reward.")
        kinds = f"{len(played)} random" + (f" and {len(oracle_played)} oracle" if oracle_played else "")
        return f"{sum(len(e.rewards) for e in every)} rewards of {kinds} episode(s) in [{low}, {high}]"

    report.run("reward_in_range", reward_in_range)

    def determinism() -> str:
        first = episode(target.env, _random_chooser(cls, 7), seed=7, max_steps=min(manifest.max_episode_steps, 50))
        second = episode(target.env, _random_chooser(cls, 7), seed=7, max_steps=min(manifest.max_episode_steps, 50))
        volatile = set(manifest.volatile_fields)
        one = [without_fields(o, volatile) for o in first.observations]
        two = [without_fields(o, volatile) for o in second.observations]
        if one != two or first.rewards != second.rewards:
            where = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b),
                         min(len(one), len(two)))
            raise CheckFailed(f"seed 7 gave different episodes (first difference at observation {where})",
                              "Draw every random choice from random.Random(seed) created in reset; list "
                              "fields that legitimately vary (timings, per-session paths) in the "
                              "manifest's volatile_fields.")
        return f"seed 7 replayed identically ({len(first.rewards)} steps)"

    report.run("seeded_determinism", determinism)

    def state_consistent() -> str:
        if not played:
            raise NotApplicable("no episode was played (see random_episodes)")
        for e in played:
            if e.step_counts != list(range(1, len(e.step_counts) + 1)):
                raise CheckFailed(f"state.step_count went {e.step_counts[:8]} over steps 1..{len(e.step_counts)}",
                                  "Increment state.step_count once per step and reset it to 0 in reset.")
        return "step_count matches the steps taken"

    report.run("state_consistent", state_consistent)

    def time_budget() -> str:
        if not played:
            raise NotApplicable("no episode was played (see random_episodes)")
        worst_step = max(e.max_step_s for e in played)
        worst_reset = max(e.reset_s for e in played)
        if worst_reset > manifest.reset_budget_s:
            raise CheckFailed(f"a reset took {worst_reset:.3f}s, over reset_budget_s={manifest.reset_budget_s}",
                              "Make reset faster or raise reset_budget_s in openenv.yaml.")
        if worst_step > manifest.step_budget_s:
            raise CheckFailed(f"a step took {worst_step:.3f}s, over step_budget_s={manifest.step_budget_s}",
                              "Make step faster or raise step_budget_s in openenv.yaml.")
        return f"slowest reset {worst_reset * 1000:.1f} ms, slowest step {worst_step * 1000:.1f} ms"

    report.run("time_budget", time_budget)


def _oracle(target: Target, manifest: Manifest, played: list[Episode], episodes: int,
            runs: list[Episode]) -> str:
    """Play the declared oracle ``episodes`` times (into ``runs``) and compare it with random."""
    from openenv.registry import load_ref

    if manifest.oracle is None:
        raise NotApplicable("no `oracle:` declared in openenv.yaml (add `oracle: pkg.mod:fn` to check "
                            "that a scripted policy beats random)")
    try:
        oracle = load_ref(manifest.oracle)
    except Exception as exc:
        raise CheckFailed(f"oracle '{manifest.oracle}' does not load: {exc}",
                          "Point `oracle:` at a function taking an observation dict and returning an "
                          "action dict.") from None
    for k in range(episodes):
        runs.append(episode(target.env, oracle, seed=k, max_steps=manifest.max_episode_steps))
    oracle_mean = sum(e.total for e in runs) / episodes
    if not played:
        raise NotApplicable(f"oracle mean return {oracle_mean:.3g}, but no random episode to compare with")
    random_mean = sum(e.total for e in played) / len(played)
    if oracle_mean < random_mean + manifest.oracle_margin:
        raise CheckFailed(f"oracle mean return {oracle_mean:.3g} does not beat random {random_mean:.3g} by "
                          f"oracle_margin={manifest.oracle_margin}",
                          "Fix the oracle or the reward, or lower oracle_margin.")
    return f"oracle {oracle_mean:.3g} vs random {random_mean:.3g} (margin {manifest.oracle_margin})"
