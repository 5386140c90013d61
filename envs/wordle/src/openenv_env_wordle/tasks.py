"""The Wordle env's declared tasks: one per secret word, in disjoint train and test word lists.

A word's split is fixed by a hash of the word itself (about one word in five is ``test``), so
adding words to ``words.txt`` never moves an existing word to the other split. The id is derived
from the word by a hash (``"wordle-3f9a1c02b7"``), never the word itself: the server stamps the
task id on the first observation, so an id that spelled the secret would hand the agent the answer.
The data is ``{"word": ...}``, what ``reset(word=...)`` plays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from openenv.tasks import InlineTasks, Task
from openenv_env_wordle.words import WORDS

__all__ = ["TASK_SOURCE", "split_of", "task_id_of", "word_tasks"]

_TEST_SHARE = 5  # one word in five, by hash


def split_of(word: str) -> str:
    """``test`` for about one word in five (by SHA-256 of the word), else ``train``."""
    return "test" if hashlib.sha256(word.encode()).digest()[0] % _TEST_SHARE == 0 else "train"


def task_id_of(word: str) -> str:
    """The stable task id of ``word``: a hash, so the id says nothing about the secret."""
    return "wordle-" + hashlib.sha256(b"openenv-wordle\0" + word.encode()).hexdigest()[:10]


def word_tasks(words: Iterable[str] = WORDS) -> InlineTasks:
    """One task per word: id ``task_id_of(word)``, data ``{"word": word}``, split by ``split_of``."""
    return InlineTasks([Task(id=task_id_of(w), split=split_of(w), data={"word": w}) for w in words],
                       name="wordle words.txt")


TASK_SOURCE = word_tasks()
