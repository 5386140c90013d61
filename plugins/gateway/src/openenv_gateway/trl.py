"""A black-box ``rollout_func(prompts, trainer)`` for TRL: each prompt is one command-harness episode.

The agent program talks to the gateway, which talks to the inference server that serves the
policy (vLLM in TRL's server mode); what comes back is TRL's rollout dict built from each episode's
sample: ``prompt_ids`` (the first turn's prompt), ``completion_ids`` (everything after it: the
model's completions and, masked out by ``env_mask``, the tool/env text between them), ``logprobs``
(the engine's, 0.0 where masked) and ``env_reward`` (the env's verdict). An episode with several
branches (the agent rewrote its history) contributes its last branch; one with no usable sample
(no engine ids, or the agent never called the model) contributes an empty completion with its reward.

``tests/gateway/test_trl_harness.py`` runs it under TRL's real ``GRPOTrainer`` (``nox -s gateway``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openenv_gateway.harness import CommandHarness, HarnessEpisode

__all__ = ["harness_rollout_func", "rollout_of"]


def rollout_of(episode: HarnessEpisode) -> dict[str, Any]:
    """One episode as TRL's per-completion fields."""
    reward = float(episode.reward or 0.0)
    if not episode.samples:
        return {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "env_reward": reward}
    sample = episode.samples[-1]
    cut = len(episode.trace.turns[sample.turns[0]].prompt_ids)
    return {"prompt_ids": sample.input_ids[:cut], "completion_ids": sample.input_ids[cut:],
            "logprobs": sample.logprobs[cut:], "env_mask": sample.loss_mask[cut:], "env_reward": reward}


def harness_rollout_func(harness: CommandHarness, episode_args: Callable[[Any, int], dict[str, Any]]
                         ) -> Callable[[list[Any], Any], dict[str, Any]]:
    """``rollout_func`` for ``GRPOTrainer``: ``episode_args(prompt, index)`` gives the keywords of
    ``harness.run`` (``episode_id``, ``verdict``, and ``prompt``/``setup``, ``task_id``, ``group_id``)."""

    def run(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                     "env_reward": []}
        for index, prompt in enumerate(prompts):
            fields = rollout_of(harness.run(**episode_args(prompt, index)))
            for name, value in fields.items():
                out[name].append(value)
        return out

    return run
