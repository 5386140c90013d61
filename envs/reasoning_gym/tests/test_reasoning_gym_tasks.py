"""reasoning_gym's declared tasks: (dataset, seed) per generator, each one fixed question."""

from __future__ import annotations

import pytest
import reasoning_gym

from openenv.tasks import TaskError, UnknownTaskError, tasks_of
from openenv_env_reasoning_gym.env import ReasoningGymEnv, task_names
from openenv_env_reasoning_gym.models import ReasoningAction
from openenv_env_reasoning_gym.policy import oracle
from openenv_env_reasoning_gym.tasks import SPLITS, TASK_DATASETS, DatasetSeedTasks


def test_the_splits_interleave_every_dataset_over_disjoint_seeds() -> None:
    source = tasks_of(ReasoningGymEnv)
    assert source is not None
    source.validate()
    assert set(TASK_DATASETS) <= set(task_names())
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 100_000, "test": 5_000}
    first = source.task_range("test", 0, len(TASK_DATASETS))
    assert [t.data["dataset"] for t in first] == list(TASK_DATASETS) and {t.seed for t in first} == {1_000_000}
    last = source.task_at("train", 99_999)
    assert last.id == f"{TASK_DATASETS[-1]}/train-9999" and source.get(last.id) == last
    with pytest.raises(IndexError):
        source.task_at("test", 5_000)


@pytest.mark.parametrize("dataset", TASK_DATASETS)
def test_a_task_asks_question_0_of_its_dataset_and_seed_and_the_oracle_solves_it(dataset: str) -> None:
    task = tasks_of(ReasoningGymEnv).get(f"{dataset}/test-1000042")  # type: ignore[union-attr]
    env = ReasoningGymEnv()
    obs = env.reset(seed=1, task=task)  # the task's seed wins
    want = reasoning_gym.create_dataset(dataset, seed=1_000_042, size=1)[0]
    assert obs.task == dataset and obs.question == want["question"] and obs.metadata["seed"] == 1_000_042
    assert env.step(ReasoningAction(**oracle(obs))).reward == 1.0


@pytest.mark.parametrize(("task_id", "says"), [("gdc/train-1", "Did you mean 'gcd'"),
                                               ("gcd/train-10000", "seed inside the split's range"),
                                               ("train-1", "<dataset>/<split>-<seed>")])
def test_an_unknown_id_says_what_ids_look_like(task_id: str, says: str) -> None:
    with pytest.raises(UnknownTaskError, match=says):
        tasks_of(ReasoningGymEnv).get(task_id)  # type: ignore[union-attr]


def test_overlapping_seed_ranges_or_clashing_datasets_are_refused() -> None:
    with pytest.raises(TaskError, match="share seeds"):
        DatasetSeedTasks(["gcd"], {"train": range(0, 10), "test": range(5, 20)})
    with pytest.raises(TaskError, match="distinct"):
        DatasetSeedTasks(["gcd", "gcd"], SPLITS)


def test_the_dataset_is_named_dataset_and_task_stays_an_in_process_alias() -> None:
    a = ReasoningGymEnv().reset(seed=4, dataset="chain_sum", size=5)
    b = ReasoningGymEnv().reset(seed=4, task="chain_sum", size=5)
    assert a.question == b.question and a.task == "chain_sum"
