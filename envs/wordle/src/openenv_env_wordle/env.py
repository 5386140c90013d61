"""Wordle: guess the secret five-letter word in six tries from per-letter feedback.

Dynamics (all promises are tested):

* ``reset(seed=k)`` draws the secret from the shipped word list with a ``random.Random`` seeded
  from ``k`` and the env's name (same seed, same secret; a policy seeded with ``k`` does not
  share the stream); ``reset(word="crane")`` sets it (it must be in the list);
  ``reset(max_guesses=n)`` changes the six tries;
* a guess is any word of the list, in any case; its feedback is green / yellow / grey per letter
  with the game's rule for repeated letters (see ``feedback.score_guess``);
* reward 1.0 for the guess that finds the secret (the episode ends, ``solved``), 0.0 for any other;
  after ``max_guesses`` guesses the episode ends and the answer is revealed;
* a word not in the list ("did you mean ...?"), a step before ``reset()`` or after the end, and a
  bad reset option raise ``openenv.errors.ValidationError``; a guess that is not five letters is
  refused by the action model;
* the declared tasks (``tasks``, ``openenv_env_wordle.tasks``) are the secret words, split into
  disjoint train and test lists; the server's ``reset(task_id="crane")`` arrives as
  ``reset(task=<openenv.tasks.Task>)`` and plays that word.
"""

from __future__ import annotations

import random
import uuid
from difflib import get_close_matches
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError, int_option
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_wordle.feedback import feedback_pattern, score_guess
from openenv_env_wordle.models import GuessResult, WordleAction, WordleObservation, WordleState
from openenv_env_wordle.tasks import TASK_SOURCE
from openenv_env_wordle.words import WORD_SET, WORDS

__all__ = ["WordleEnv"]


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


class WordleEnv(Environment[WordleAction, WordleObservation, WordleState]):
    """Wordle on the shipped word list. Instances share nothing (the list is read-only)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the secret and the guesses (the feedback is recomputed on restore).
    SUPPORTS_SNAPSHOT = True
    # A step is five letter comparisons: run inline.
    BLOCKING = False
    tasks = TASK_SOURCE

    def __init__(self) -> None:
        super().__init__()
        self._secret = ""
        self._history: list[GuessResult] = []
        self._max_guesses = 6
        self._solved = False
        self._episode_id: str | None = None

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> WordleObservation:
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = sorted(set(kwargs) - {"word", "max_guesses"})
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; Wordle accepts word and max_guesses",
                          kind="unknown_option", loc=unknown[:1])
        max_guesses = int_option(kwargs, "max_guesses", 6, 1, 20)
        if "word" in kwargs:
            word = kwargs["word"]
            if not isinstance(word, str) or word.lower() not in WORD_SET:
                raise _refuse(f"the secret {word!r} is not in the word list{self._hint(word)}",
                              kind="unknown_word", loc=["word"], value=word)
            self._secret = word.lower()
        else:
            # Salted: a policy that seeds its own random.Random(seed) and picks from the word list
            # must not draw the secret by coincidence.
            rng = random.Random(None if seed is None else f"openenvkit-env-wordle/{seed}")
            self._secret = rng.choice(WORDS)
        self._history = []
        self._max_guesses = max_guesses
        self._solved = False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(0.0)

    def step(
        self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WordleObservation:
        if self._episode_id is None:
            raise _refuse("No game in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The game is over (word found or out of guesses): call reset().",
                          kind="episode_over")
        guess = action.guess.lower()
        if guess not in WORD_SET:
            raise _refuse(f"{guess!r} is not in the word list{self._hint(guess)}; a guess must be "
                          "one of the words in legal_actions", kind="unknown_word", loc=["guess"],
                          value=action.guess)
        pattern = feedback_pattern(guess, self._secret)
        colours = score_guess(guess, self._secret)
        self._history.append(GuessResult(word=guess, feedback=colours, pattern=pattern))
        self._solved = guess == self._secret
        return self._observe(1.0 if self._solved else 0.0)

    @property
    def state(self) -> WordleState:
        return WordleState(
            episode_id=self._episode_id, step_count=len(self._history),
            guesses=[h.word for h in self._history], max_guesses=self._max_guesses,
            solved=self._solved, done=self._done,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"secret": self._secret, "guesses": [h.word for h in self._history],
                "max_guesses": self._max_guesses, "episode_id": self._episode_id}

    def restore(self, data: dict[str, Any]) -> WordleObservation:
        secret, guesses, max_guesses = data.get("secret"), data.get("guesses"), data.get("max_guesses")
        if (secret not in WORD_SET or type(max_guesses) is not int or not 1 <= max_guesses <= 20
                or not isinstance(guesses, list) or len(guesses) > max_guesses
                or not all(g in WORD_SET for g in guesses) or secret in guesses[:-1]):
            raise ValueError("not a wordle snapshot: the secret and every guess must be words of the list, "
                             "at most max_guesses guesses, none after the secret")
        self._secret, self._max_guesses = str(secret), max_guesses
        self._history = [GuessResult(word=g, feedback=score_guess(g, self._secret),
                                     pattern=feedback_pattern(g, self._secret)) for g in guesses]
        self._solved = bool(guesses) and guesses[-1] == self._secret
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        return self._observe(None)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="wordle",
            description=f"Guess a five-letter word in six tries from green/yellow/grey feedback; "
            f"+1.0 for the word. {len(WORDS)} words ship with the package.",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    @property
    def _done(self) -> bool:
        return self._solved or len(self._history) >= self._max_guesses

    @staticmethod
    def _hint(word: Any) -> str:
        close = get_close_matches(str(word).lower(), WORDS, n=3, cutoff=0.6)
        return f" (did you mean {', '.join(repr(w) for w in close)}?)" if close else ""

    def _observe(self, reward: float | None) -> WordleObservation:
        done = self._done
        guessed = {h.word for h in self._history}
        return WordleObservation(
            history=[h.model_copy() for h in self._history],
            guesses_left=self._max_guesses - len(self._history),
            legal_actions=[] if done else [{"guess": w} for w in WORDS if w not in guessed],
            solved=self._solved, answer=self._secret if done else None,
            reward=reward, done=done, metadata={"step": len(self._history)},
        )
