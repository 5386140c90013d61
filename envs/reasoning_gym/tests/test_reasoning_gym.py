"""The reasoning-gym env: tasks by name, its own scoring, seeding, bad input, README, a served run."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import ExecutionError, ValidationError
from openenv.testing import EnvContract, check_registered, readme_snippets, run_cli, run_snippet
from openenv_env_reasoning_gym import ReasoningAction, ReasoningGymEnv
from openenv_env_reasoning_gym.env import task_names
from openenv_env_reasoning_gym.policy import solve

README = Path(__file__).resolve().parents[1] / "README.md"



def answer(env: ReasoningGymEnv, text: str):
    return env.step(ReasoningAction(answer=text))


@pytest.mark.parametrize("task", ["basic_arithmetic", "chain_sum", "spell_backward", "gcd", "word_sorting"])
def test_the_oracle_scores_one(task: str) -> None:
    env = ReasoningGymEnv()
    obs = env.reset(seed=11, task=task, size=20)
    assert obs.task == task and obs.question and not obs.done and obs.score is None
    assert obs.reference_answer is None  # hidden until answered
    obs = answer(env, solve(obs))
    assert obs.reward == 1.0 and obs.score == 1.0 and obs.done and obs.feedback == "correct"


def test_wrong_and_malformed_answers_score_zero() -> None:
    env = ReasoningGymEnv()
    obs = env.reset(seed=1, task="basic_arithmetic", size=10)
    right = solve(obs)
    obs = answer(env, "definitely not a number")
    assert obs.reward == 0.0 and obs.feedback == "wrong" and obs.reference_answer == right
    env.reset(seed=1, task="basic_arithmetic", size=10)
    assert answer(env, "").reward == 0.0
    with pytest.raises(ValueError):
        ReasoningAction.model_validate({"answer": 12})  # not a string
    with pytest.raises(ValueError):
        ReasoningAction.model_validate({"answer": "1", "extra": True})


def test_one_answer_per_episode() -> None:
    env = ReasoningGymEnv()
    with pytest.raises(ExecutionError, match="reset"):
        answer(env, "1")
    obs = env.reset(seed=2, task="chain_sum", size=5)
    answer(env, solve(obs))
    with pytest.raises(ExecutionError, match="reset"):
        answer(env, "1")


def test_same_seed_same_question_and_index_and_config() -> None:
    env = ReasoningGymEnv()
    a = env.reset(seed=5, task="chain_sum", size=100)
    b = ReasoningGymEnv().reset(seed=5, task="chain_sum", size=100)
    assert (a.question, a.index) == (b.question, b.index)
    assert len({env.reset(seed=s, task="chain_sum", size=100).question for s in range(8)}) > 1
    assert env.reset(seed=5, task="chain_sum", size=100, index=3).index == 3
    unseeded = env.reset(task="chain_sum", size=10)
    assert isinstance(unseeded.metadata["seed"], int)
    assert answer(env, solve(unseeded)).reward == 1.0
    obs = env.reset(seed=3, task="spell_backward", size=10, config={"min_word_len": 6})
    assert len(solve(obs, {"min_word_len": 6})) >= 6


def test_bad_reset_input() -> None:
    env = ReasoningGymEnv()
    with pytest.raises(ValidationError, match="Did you mean 'basic_arithmetic'"):
        env.reset(task="basic_arithmetc")
    with pytest.raises(ValidationError, match="bad config"):
        env.reset(task="basic_arithmetic", config={"bogus": 1})
    with pytest.raises(ValidationError, match="bad config"):
        env.reset(task="basic_arithmetic", config={"min_terms": 9, "max_terms": 2})
    with pytest.raises(ValidationError, match="index"):
        env.reset(seed=1, size=5, index=5)
    with pytest.raises(ValidationError, match="unknown reset option"):
        env.reset(tsk="gcd")
    assert len(task_names()) > 50 and "basic_arithmetic" in task_names()


def test_readme_example_runs() -> None:
    block = readme_snippets(README)[0]
    done = run_snippet(block, timeout=180, ignore_warnings=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-2] == "1.0 correct" and lines[-1] == "0.0 True"


@pytest.mark.requires_plugins("provider-local", "transport-ws")
def test_served_by_openenv_run(tmp_path: Path) -> None:
    done = run_cli("run", "reasoning_gym", "--episodes", "2", "--seed", "1", tmp_path=tmp_path, timeout=180,
                   env={"PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("  step")]
    assert len(steps) == 2 and all("done true" in line for line in steps)


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(ReasoningGymEnv).run()  # run() raises on a broken check


async def test_contract_plugin_manifest_and_independent_sessions() -> None:
    from openenv.sessions import SessionManager
    from openenv_env_reasoning_gym import ReasoningGymEnv, plugin

    entry, manifest = check_registered(plugin, "reasoning_gym", "openenv_env_reasoning_gym.env:ReasoningGymEnv")
    assert entry.load() is ReasoningGymEnv and entry.description
    assert manifest.description and manifest.tags
    assert manifest.reward_range is not None and len(manifest.reward_range) == 2 and "resources" in manifest.model_extra
    manager = SessionManager(ReasoningGymEnv, env_name="reasoning_gym", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1, "dataset": "chain_sum", "size": 5})
        await manager.reset(b, {"seed": 1, "dataset": "chain_sum", "size": 5})
        await manager.step(a, {"answer": "0"})
        state_a, state_b = await manager.state(a), await manager.state(b)
        assert state_a["step_count"] == 1 and state_b["step_count"] == 0
        assert state_a["done"] != state_b["done"]
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("size", ["x", "10", 0, 2.5, False])
def test_wrongly_typed_size_is_a_validation_error_naming_the_fix(size: object) -> None:
    env = ReasoningGymEnv()
    with pytest.raises(ValidationError, match=r"size must be a whole number of at least 1 \(e\.g\. size=10\), "
                                              rf"got {size!r}"):
        env.reset(seed=1, size=size)
    assert env.reset(seed=1, size=10).question
