"""Wordle: feedback with repeated letters, the shipped word list, seeds, bad input, the oracle,
the README and serving."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from openenv.env import env_traits
from openenv.errors import ValidationError
from openenv.sessions import SessionManager
from openenv.testing import (
    EnvContract,
    check_registered,
    exec_snippet,
    readme_snippets,
    served_cli,
)
from openenv_env_wordle import WORDS, Solver, WordleAction, WordleEnv, score_guess
from openenv_env_wordle.feedback import feedback_pattern, pattern_of
from openenv_env_wordle.oracle import solve
from openenv_env_wordle.words import load_words

README = Path(__file__).resolve().parents[1] / "README.md"


def colours(pattern: str) -> list[str]:
    return [{"G": "green", "Y": "yellow", "-": "grey"}[ch] for ch in pattern]


@pytest.mark.parametrize(("guess", "secret", "expected"), [
    ("crane", "crane", "GGGGG"),
    ("crane", "moist", "-----"),
    ("react", "crane", "YYGY-"),
    # Repeated letters in the guess: no more yellows than the secret has unmatched copies.
    ("geese", "those", "---GG"),
    ("sheep", "geese", "Y-GY-"),
    ("llama", "label", "GYY--"),
    ("speed", "abide", "--Y-Y"),
    ("error", "rover", "YY-YG"),
    ("allow", "alley", "GGG--"),
    ("hello", "world", "---GY"),
    # Repeated letters in the secret: a single copy in the guess is one green or yellow.
    ("those", "geese", "---GG"),
    ("alert", "llama", "YG---"),
    ("kayak", "knock", "G---G"),
    # A green later in the word takes the copy before a yellow earlier on could.
    ("eerie", "there", "Y-Y-G"),
    ("lever", "eerie", "-G-YY"),
])
def test_repeated_letters(guess: str, secret: str, expected: str) -> None:
    assert feedback_pattern(guess, secret) == expected
    assert score_guess(guess, secret) == colours(expected)
    assert pattern_of(score_guess(guess, secret)) == expected


def reference_feedback(guess: str, secret: str) -> str:
    """The rule written the slow way: greens first, then yellows from a per-letter budget."""
    result = ["-"] * 5
    budget = {ch: secret.count(ch) for ch in set(secret)}
    for i in range(5):
        if guess[i] == secret[i]:
            result[i] = "G"
            budget[guess[i]] -= 1
    for i in range(5):
        if result[i] == "-" and budget.get(guess[i], 0) > 0:
            result[i] = "Y"
            budget[guess[i]] -= 1
    return "".join(result)


def test_feedback_agrees_with_the_reference_rule_on_many_pairs() -> None:
    rng = random.Random(0)
    pairs = [(rng.choice(WORDS), rng.choice(WORDS)) for _ in range(3000)]
    pairs += [(w, w) for w in WORDS[:50]]
    for guess, secret in pairs:
        assert feedback_pattern(guess, secret) == reference_feedback(guess, secret), (guess, secret)


def test_word_list_ships_in_the_package() -> None:
    assert len(WORDS) >= 300 and len(set(WORDS)) == len(WORDS) and list(WORDS) == sorted(WORDS)
    assert all(len(w) == 5 and w.isalpha() and w.islower() for w in WORDS)
    import openenv_env_wordle

    shipped = Path(openenv_env_wordle.__file__).with_name("words.txt")
    assert load_words(shipped.read_text("utf-8")) == WORDS
    with pytest.raises(ValueError, match="line 2: 'toolong'"):
        load_words("# comment\ntoolong\n")
    with pytest.raises(ValueError, match="listed twice"):
        load_words("crane\ncrane\n")


def test_a_game_won_and_a_game_lost() -> None:
    env = WordleEnv()
    obs = env.reset(word="crane", episode_id="ep")
    assert obs.guesses_left == 6 and obs.history == [] and obs.answer is None
    assert len(obs.legal_actions) == len(WORDS) and {"guess": "crane"} in obs.legal_actions
    obs = env.step(WordleAction(guess="REACT"))
    assert obs.history[0].word == "react" and obs.history[0].pattern == "YYGY-"
    assert obs.history[0].feedback == ["yellow", "yellow", "green", "yellow", "grey"]
    assert obs.reward == 0.0 and not obs.done and {"guess": "react"} not in obs.legal_actions
    obs = env.step(WordleAction(guess="crane"))
    assert obs.solved and obs.done and obs.reward == 1.0 and obs.answer == "crane" and obs.legal_actions == []
    assert env.state.guesses == ["react", "crane"] and env.state.solved and env.state.step_count == 2

    obs = env.reset(word="zebra", max_guesses=3)
    for word in ("apple", "about", "crane"):
        obs = env.step(WordleAction(guess=word))
    assert obs.done and not obs.solved and obs.reward == 0.0 and obs.answer == "zebra"
    assert obs.guesses_left == 0


def test_oracle_finds_the_word_within_six_guesses() -> None:
    env = WordleEnv()
    rng = random.Random(1)
    hard = ["eerie", "geese", "sheep", "shell", "shelf", "sight", "night", "might", "light", "eight"]
    for word in hard + rng.sample(WORDS, 60):
        obs = env.reset(word=word)
        while not obs.done:
            obs = env.step(WordleAction(**solve(obs.model_dump())))
        assert obs.solved and obs.reward == 1.0 and len(obs.history) <= 6, (word, obs.history)


def test_solver_filters_candidates_by_feedback() -> None:
    solver = Solver()
    solver.update("crane", feedback_pattern("crane", "crate"))
    assert "crate" not in WORDS or "crate" in solver.candidates
    assert all(feedback_pattern("crane", w) == feedback_pattern("crane", "crate") for w in solver.candidates)
    solver = Solver()
    solver.update("sight", feedback_pattern("sight", "night"))
    assert {"night", "light", "might", "eight"} <= set(solver.candidates) and "sight" not in solver.candidates


def test_same_seed_same_secret() -> None:
    def answer(seed: int) -> str | None:
        env = WordleEnv()
        env.reset(seed=seed)
        obs = None
        for word in ("about", "crane", "moist", "lucky", "fight", "vivid"):
            obs = env.step(WordleAction(guess=word))
            if obs.done:
                break
        assert obs is not None
        return obs.answer

    assert answer(5) == answer(5)
    assert len({answer(s) for s in range(10)}) > 3
    # A random policy seeded with the same number does not pick the secret by coincidence.
    env = WordleEnv()
    same = 0
    for seed in range(40):
        env.reset(seed=seed)
        same += env.step(WordleAction(guess=random.Random(seed).choice(WORDS))).solved
    assert same <= 1


def test_bad_input_is_a_structured_error() -> None:
    env = WordleEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(WordleAction(guess="crane"))
    for bad in ("cran", "cranes", "cr4ne", "", 12345):
        with pytest.raises(ValueError):
            WordleAction.model_validate({"guess": bad})
    env.reset(word="crane")
    with pytest.raises(ValidationError, match=r"not in the word list \(did you mean .*'crane'") as info:
        env.step(WordleAction(guess="crene"))
    assert info.value.errors[0]["loc"] == ["guess"] and env.state.step_count == 0
    with pytest.raises(ValidationError, match="not in the word list"):
        env.step(WordleAction(guess="qqqqq"))
    for kwargs, match in (({"word": "qqqqq"}, "secret 'qqqqq'"), ({"word": 5}, "secret 5"),
                          ({"max_guesses": 0}, "max_guesses"), ({"hard_mode": True}, "accepts word")):
        with pytest.raises(ValidationError, match=match):
            env.reset(**kwargs)
    env.reset(word="crane")
    env.step(WordleAction(guess="crane"))
    with pytest.raises(ValidationError, match="game is over") as info:
        env.step(WordleAction(guess="crane"))
    assert info.value.errors[0]["type"] == "episode_over"


async def test_sessions_are_independent_and_errors_keep_them_alive() -> None:
    traits = env_traits(WordleEnv)
    assert traits["SUPPORTS_CONCURRENT_SESSIONS"] and not traits["BLOCKING"]
    manager = SessionManager(WordleEnv, env_name="wordle", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"word": "crane"})
        await manager.reset(b, {"word": "crane"})
        await manager.step(a, {"guess": "react"})
        with pytest.raises(ValidationError):
            await manager.step(a, {"guess": "zzzzz"})
        with pytest.raises(ValidationError):
            await manager.step(a, {"guess": "toolong"})
        assert (await manager.state(a))["guesses"] == ["react"]
        assert (await manager.state(b))["guesses"] == []
    finally:
        await manager.shutdown()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(WordleEnv).run()  # run() raises on a broken check


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    namespace = exec_snippet(blocks[0], filename=README)
    assert namespace["obs"].solved  # type: ignore[attr-defined]


def test_readme_feedback_table_is_right() -> None:
    rows = re.findall(r"^\| `(\w{5})` \| `(\w{5})` \| `([GY-]{5})` \|", README.read_text("utf-8"), flags=re.M)
    assert len(rows) == 4
    for guess, secret, expected in rows:
        assert feedback_pattern(guess, secret) == expected


def test_plugin_registration() -> None:
    from openenv_env_wordle import plugin

    entry, _ = check_registered(plugin, "wordle", "openenv_env_wordle.env:WordleEnv")
    assert entry.load() is WordleEnv


@pytest.mark.requires_plugins("transport-ws")
@pytest.mark.slow
def test_served_errors_are_structured_and_the_server_keeps_serving(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with (served_cli("wordle", tmp_path=tmp_path, max_sessions=4) as url,
          GenericEnvClient(url).sync() as one, GenericEnvClient(url).sync() as two):
        one.reset(word="crane")
        two.reset(word="crane")
        with pytest.raises(ValidationError, match="did you mean") as info:
            one.step({"guess": "crene"})
        assert info.value.errors[0]["type"] == "unknown_word" and info.value.errors[0]["input"] == "crene"
        with pytest.raises(ValidationError) as info:
            one.step({"guess": "toolong"})
        assert info.value.errors[0]["loc"][-1] == "guess"
        assert two.step({"guess": "react"}).observation["history"][0]["pattern"] == "YYGY-"
        result = one.reset(seed=4)
        while not result.done:
            result = one.step(solve(result.observation))
        assert result.observation["solved"] and result.reward == 1.0
        with pytest.raises(ValidationError, match="game is over"):
            one.step({"guess": "crane"})
