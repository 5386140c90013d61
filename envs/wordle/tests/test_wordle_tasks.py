"""Wordle's declared tasks: every word once, in disjoint train and test lists, each plays its word."""

from __future__ import annotations

from openenv.tasks import tasks_of
from openenv_env_wordle.env import WordleEnv
from openenv_env_wordle.models import WordleAction
from openenv_env_wordle.tasks import split_of
from openenv_env_wordle.words import WORDS


def test_the_word_list_is_split_into_disjoint_train_and_test_lists() -> None:
    source = tasks_of(WordleEnv)
    assert source is not None
    words = {s.name: {t.data["word"] for t in source.task_range(s.name)} for s in source.splits()}
    assert not words["train"] & words["test"] and words["train"] | words["test"] == set(WORDS)
    assert 0.1 < len(words["test"]) / len(WORDS) < 0.3
    assert all(split_of(w) == "test" for w in words["test"])


def test_a_task_plays_its_word() -> None:
    source = tasks_of(WordleEnv)
    assert source is not None
    for task in source.task_range("test", 0, 5):
        env = WordleEnv()
        env.reset(seed=7, task=task)
        obs = env.step(WordleAction(guess=task.data["word"]))
        assert obs.reward == 1.0 and obs.done, task.id


def test_task_ids_never_spell_the_secret() -> None:
    # The server stamps task_id on the first observation: an id containing the word would leak it.
    from openenv_env_wordle.tasks import TASK_SOURCE

    for split in ("train", "test"):
        for task in TASK_SOURCE.task_range(split):
            assert task.data["word"] not in task.id, task.id
