"""The black-box ``rollout_func`` under TRL's real ``GRPOTrainer``: each completion is a command-harness
episode (an agent program → the gateway → the tiny-model server), rewarded by the served echo env.

The trainer's model and tokenizer are built exactly as the server's (same seeded weights, same BPE
training), so the captured ids are ids of the trainer's vocabulary and the first step is on-policy.
(The server's weights are not synced after a step: that is the trainer's weight-sync job, e.g.
TRL's vLLM server mode, not the gateway's.)
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def test_grpo_trainer_trains_on_black_box_agent_episodes(gateway: Any, echo_server: tuple[str, str],
                                                         tmp_path: Path) -> None:
    import trl
    from datasets import Dataset

    from openenv.client import GenericEnvClient
    from openenv_gateway.harness import CommandHarness, env_verdict
    from openenv_gateway.testing.tinymodel import build_model, build_tokenizer
    from openenv_gateway.trl import harness_rollout_func

    base_url, token = echo_server
    clients: list[Any] = []

    def episode_args(prompt: Any, index: int) -> dict[str, Any]:
        env = GenericEnvClient(base_url, token=token).sync()
        clients.append(env)
        env.reset()
        text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        return {"episode_id": f"grpo-{len(clients)}", "prompt": text, "task_id": "echo", "group_id": text,
                "verdict": env_verdict(env, lambda run: {"message": run.stdout.strip() or "(nothing)"})}

    seen: list[list[float]] = []

    def env_reward(completions: list[Any], env_reward: list[float] | None = None, **_: object) -> list[float]:
        assert env_reward is not None and len(env_reward) == len(completions)
        seen.append([float(r) for r in env_reward])
        return seen[-1]

    agent = [sys.executable, str(Path(__file__).with_name("agent_one_token.py"))]
    harness = CommandHarness(gateway, agent, deadline_s=120, grade_reserve_s=20)
    tokenizer = build_tokenizer()
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": f"Say something {i}."}]} for i in range(2)])
    args = trl.GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2, num_generations=2,
                          max_completion_length=64, max_steps=2, learning_rate=1e-3, logging_steps=1,
                          report_to=[], save_strategy="no", use_cpu=True, bf16=False, seed=0)
    trainer = trl.GRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, args=args,
                              train_dataset=dataset, rollout_func=harness_rollout_func(harness, episode_args),
                              reward_funcs=[env_reward])
    try:
        trainer.train()
    finally:
        for env in clients:
            env.close()
    assert trainer.state.global_step == 2
    assert len(seen) >= 2 and all(len(batch) == 2 and all(r > 0 for r in batch) for batch in seen)
