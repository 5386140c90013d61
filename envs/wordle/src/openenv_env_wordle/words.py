"""The word list shipped with the package (``words.txt``): the secrets and the allowed guesses."""

from __future__ import annotations

from importlib.resources import files

__all__ = ["WORDS", "WORD_SET", "load_words"]


def load_words(text: str) -> tuple[str, ...]:
    """Words of a list file: one a line, ``#`` comments and blank lines skipped; each checked to be
    five lowercase letters, no repeats (``ValueError`` naming the line otherwise)."""
    words: list[str] = []
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        word = raw.strip()
        if not word or word.startswith("#"):
            continue
        if len(word) != 5 or not (word.isascii() and word.isalpha() and word.islower()):
            raise ValueError(f"line {number}: {word!r} is not five lowercase letters")
        if word in seen:
            raise ValueError(f"line {number}: {word!r} is listed twice")
        seen.add(word)
        words.append(word)
    return tuple(words)


#: Every word, in file order (sorted).
WORDS: tuple[str, ...] = load_words(files("openenv_env_wordle").joinpath("words.txt").read_text("utf-8"))
WORD_SET: frozenset[str] = frozenset(WORDS)
