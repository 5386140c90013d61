"""The Wordle env's declared tasks: one per secret word, in disjoint train and test word lists.

A word's split is fixed by a hash of the word itself (about one word in five is ``test``), so
adding words to ``words.txt`` never moves an existing word to the other split. The id is the word
(``"crane"``) and the data ``{"word": ...}``, what ``reset(word=...)`` plays.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from openenv.tasks import InlineTasks, Task
from openenv_env_wordle.words import WORDS

__all__ = ["TASK_SOURCE", "split_of", "word_tasks"]

_TEST_SHARE = 5  # one word in five, by hash


def split_of(word: str) -> str:
    """``test`` for about one word in five (by SHA-256 of the word), else ``train``."""
    return "test" if hashlib.sha256(word.encode()).digest()[0] % _TEST_SHARE == 0 else "train"


def word_tasks(words: Iterable[str] = WORDS) -> InlineTasks:
    """One task per word: id the word, data ``{"word": word}``, split by ``split_of``."""
    return InlineTasks([Task(id=w, split=split_of(w), data={"word": w}) for w in words], name="wordle words.txt")


TASK_SOURCE = word_tasks()
