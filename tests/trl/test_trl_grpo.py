"""The TRL adapter against TRL's real GRPOTrainer: a tiny random model built from a config and a
tokenizer trained here (nothing downloaded), a served grid_world, two training steps on the CPU.

Runs in ``nox -s trl`` (torch's CPU wheel + trl); skipped where trl is not installed.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

trl = pytest.importorskip("trl", reason="the TRL adapter tests need trl and torch (nox -s trl)")
torch = pytest.importorskip("torch")

from openenv_rollouts.trl import environment_class, episode_reward, rollout_func  # noqa: E402


@pytest.fixture(scope="module")
def grid_env():
    cls = environment_class("grid_world", max_sessions=16)
    yield cls
    cls.shutdown()


def test_the_generated_class_has_typed_documented_tools(grid_env) -> None:
    from transformers.utils import get_json_schema

    sig = inspect.signature(grid_env.step)
    assert list(sig.parameters) == ["self", "move"] and sig.return_annotation is str
    schema = get_json_schema(grid_env().step)  # what TRL renders into the prompt
    assert schema["function"]["name"] == "step"
    assert schema["function"]["parameters"]["properties"]["move"]["enum"] == ["up", "down", "left", "right"]
    env = grid_env()
    try:
        first = json.loads(env.reset(seed=1, prompt="ignored: TRL's own column"))
        legal = first["legal_actions"]
        answer = env.step(move=legal[0])
        assert json.loads(answer.removesuffix(" (episode over)"))["position"] != first["position"]
        assert env.get_reward() == env.reward != 0.0 and episode_reward([env]) == [env.reward]
        assert env.step(move="sideways").startswith("Invalid action")
    finally:
        env._close()


def test_grpo_trainer_runs_two_steps_against_a_served_env(grid_env, tmp_path: Path, tiny_tokenizer,
                                                          tiny_model) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = tiny_tokenizer
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Reach the goal G."}], "seed": s}
                                 for s in range(4)])
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=12, max_steps=2, learning_rate=1e-3, logging_steps=1,
                      report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=0)
    trainer = GRPOTrainer(model=tiny_model(tokenizer), processing_class=tokenizer, args=args,
                          train_dataset=dataset, environment_factory=grid_env, reward_funcs=[episode_reward])
    trainer.train()
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logged) == 2
    assert any(k.endswith("GridWorldToolEnv/mean") for k in logged[0])  # get_reward: the env owns a reward
    pool = [e for envs in trainer._environment_pool.values() for e in envs]
    assert pool and all(isinstance(e, grid_env) for e in pool)
    for env in pool:
        env._close()


def test_rollout_func_plays_multi_turn_episodes(grid_env, tiny_tokenizer, tiny_model) -> None:
    tokenizer = tiny_tokenizer

    class Trainer:  # the two attributes rollout_func reads from GRPOTrainer
        processing_class = tokenizer
        model = tiny_model(tokenizer)
        max_completion_length = 8

    out = rollout_func(grid_env, max_turns=2)([[{"role": "user", "content": "Reach G."}]] * 2, Trainer())
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"}
    for ids, lps, mask in zip(out["completion_ids"], out["logprobs"], out["env_mask"], strict=True):
        assert len(ids) == len(lps) == len(mask) > 0 and mask[0] == 1
        assert all(lp <= 0.0 for lp in lps)


def test_grpo_trainer_trains_on_rollout_func_episodes(grid_env, tmp_path: Path, tiny_tokenizer,
                                                      tiny_model) -> None:
    """``rollout_func`` under TRL's real trainer: multi-turn episodes, the env's reward as the reward."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    seen: list[list[float]] = []

    def env_reward(completions, env_reward=None, **_: object) -> list[float]:
        assert env_reward is not None and len(env_reward) == len(completions)
        seen.append([float(r) for r in env_reward])
        return seen[-1]

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "Reach the goal G."}]}] * 4)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=12, max_steps=2, learning_rate=1e-3, logging_steps=1,
                      report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=0)
    trainer = GRPOTrainer(model=tiny_model(tiny_tokenizer), processing_class=tiny_tokenizer, args=args,
                          train_dataset=dataset, rollout_func=rollout_func(grid_env, max_turns=2),
                          reward_funcs=[env_reward])
    trainer.train()
    assert trainer.state.global_step == 2
    assert len(seen) >= 2 and all(len(batch) == 2 for batch in seen)
    assert len([h for h in trainer.state.log_history if "reward" in h]) == 2
