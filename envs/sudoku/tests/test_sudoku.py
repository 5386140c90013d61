"""Sudoku: unique puzzles from the seed, placements, penalties, bad input, the oracle, the README,
serving."""

from __future__ import annotations

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
from openenv_env_sudoku import SudokuAction, SudokuEnv, count_solutions, generate_puzzle, solve_grid
from openenv_env_sudoku.oracle import solve
from openenv_env_sudoku.solver import is_consistent

README = Path(__file__).resolve().parents[1] / "README.md"
# A well-known puzzle with one solution, and that solution.
PUZZLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
SOLUTION = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"


def grid(text: str) -> list[int]:
    return [0 if ch == "." else int(ch) for ch in text]


def test_solver_solves_and_counts() -> None:
    assert solve_grid(grid(PUZZLE)) == grid(SOLUTION)
    assert count_solutions(grid(PUZZLE)) == 1
    assert count_solutions([0] * 81) == 2  # the limit: an empty grid has many
    # Only the top band given: swapping the other two bands of a solution gives another one.
    top_band = grid(SOLUTION[:27]) + [0] * 54
    assert count_solutions(top_band) == 2 and count_solutions(top_band, limit=5) == 5
    one_gap = grid(SOLUTION)
    one_gap[40] = 0
    assert count_solutions(one_gap) == 1
    clash = grid(SOLUTION)
    clash[1] = clash[0]
    assert solve_grid(clash) is None and count_solutions(clash) == 0
    with pytest.raises(ValueError, match="81 integers"):
        solve_grid([0] * 80)


def test_generated_puzzles_have_one_solution_and_are_seeded() -> None:
    for seed in range(12):
        for clues in (36, 26):
            puzzle, solution = generate_puzzle(seed, clues)
            assert sum(1 for d in puzzle if d) == clues
            assert all(d in (0, s) for d, s in zip(puzzle, solution, strict=True))
            assert 0 not in solution and is_consistent(solution)
            assert count_solutions(puzzle, 2) == 1 and solve_grid(puzzle) == solution
            assert generate_puzzle(seed, clues) == (puzzle, solution)
    assert generate_puzzle(1)[0] != generate_puzzle(2)[0]
    sparse, _ = generate_puzzle(3, 17)  # asks for fewer than one pass can reach: stays unique
    assert count_solutions(sparse, 2) == 1 and 17 <= sum(1 for d in sparse if d) <= 30


def test_oracle_solves_every_puzzle_with_return_one() -> None:
    env = SudokuEnv()
    for seed in range(8):
        obs = env.reset(seed=seed, clues=28 + seed)
        total = 0.0
        blanks = obs.empty_cells
        while not obs.done:
            obs = env.step(SudokuAction(**solve(obs.model_dump())))
            assert obs.result == "correct"
            total += obs.reward or 0.0
        assert obs.solved and obs.empty_cells == 0 and obs.legal_actions == [] and obs.mistakes == 0
        assert env.state.step_count == blanks and total == pytest.approx(1.0)
        assert is_consistent([int(ch) for ch in "".join(obs.board)])


def test_placements_conflicts_and_wrong_digits() -> None:
    env = SudokuEnv(max_mistakes=3)
    obs = env.reset(puzzle=PUZZLE)
    assert obs.board[0] == "53..7...." and obs.empty_cells == 51 and obs.result == "start"
    # Row 0, col 2: the solution is 4. A 5 repeats the row's 5 (a conflict); 1 breaks no rule
    # yet but is wrong; neither is written.
    obs = env.step(SudokuAction(row=0, col=2, digit=5))
    assert obs.result == "conflict" and obs.reward == -0.1 and obs.board[0] == "53..7...."
    assert [0, 0] in obs.metadata["conflicts_with"] and obs.mistakes == 1 and obs.mistakes_left == 2
    assert {"row": 0, "col": 2, "digit": 1} in obs.legal_actions
    obs = env.step(SudokuAction(row=0, col=2, digit=1))
    assert obs.result == "wrong" and obs.reward == -0.1 and obs.metadata["conflicts_with"] == []
    obs = env.step(SudokuAction(row=0, col=2, digit=4))
    assert obs.result == "correct" and obs.board[0] == "534.7...." and obs.reward == pytest.approx(1 / 51)
    assert not any(a["row"] == 0 and a["col"] == 2 for a in obs.legal_actions)
    obs = env.step(SudokuAction(row=0, col=3, digit=9))  # the third mistake ends the episode
    assert obs.done and not obs.solved and obs.mistakes_left == 0 and obs.legal_actions == []
    state = env.state
    assert state.done and not state.solved and state.mistakes == 3 and state.clues == 30


def test_legal_actions_are_exactly_the_rule_abiding_placements() -> None:
    env = SudokuEnv()
    obs = env.reset(seed=4)
    legal = {(a["row"], a["col"], a["digit"]) for a in obs.legal_actions}
    board = grid("".join(obs.board))
    for cell in range(81):
        for digit in range(1, 10):
            trial = board[:]
            fits = trial[cell] == 0
            trial[cell] = digit
            fits = fits and is_consistent(trial)
            assert ((cell // 9, cell % 9, digit) in legal) == fits


def test_same_seed_same_puzzle() -> None:
    env = SudokuEnv()
    assert env.reset(seed=21).board == env.reset(seed=21).board
    assert env.reset(seed=21).board != env.reset(seed=22).board
    assert env.reset(seed=21, clues=40).empty_cells == 41


def test_bad_input_is_a_structured_error() -> None:
    env = SudokuEnv()
    with pytest.raises(ValidationError, match="reset"):
        env.step(SudokuAction(row=0, col=0, digit=1))
    for bad in ({"row": 9, "col": 0, "digit": 1}, {"row": 0, "col": 0, "digit": 0},
                {"row": 0, "col": 0}, {"row": 0, "col": 0, "digit": 1, "value": 2}):
        with pytest.raises(ValueError):
            SudokuAction.model_validate(bad)
    for kwargs, match in (({"clues": 10}, "clues must be"), ({"clues": "many"}, "clues must be"),
                          ({"puzzle": "123"}, "81 cells"), ({"puzzle": "x" * 81}, "characters \\['x'\\]"),
                          ({"puzzle": "." * 81}, "more than one solution"),
                          ({"puzzle": "55" + "." * 79}, "no solution"),
                          ({"difficulty": "hard"}, "accepts clues and puzzle")):
        with pytest.raises(ValidationError, match=match):
            env.reset(**kwargs)
    env.reset(puzzle=[PUZZLE[r * 9:(r + 1) * 9] for r in range(9)])
    with pytest.raises(ValidationError, match="is a given \\(5\\)") as info:
        env.step(SudokuAction(row=0, col=0, digit=5))
    assert info.value.errors[0]["type"] == "cell_filled" and env.state.step_count == 0
    env.step(SudokuAction(row=0, col=2, digit=4))
    with pytest.raises(ValidationError, match="already filled"):
        env.step(SudokuAction(row=0, col=2, digit=4))
    obs = env.reset(seed=1, clues=78)
    while not obs.done:
        obs = env.step(SudokuAction(**solve(obs)))
    with pytest.raises(ValidationError, match="over") as info:
        env.step(SudokuAction(row=0, col=0, digit=1))
    assert info.value.errors[0]["type"] == "episode_over"


async def test_sessions_are_independent_and_errors_keep_them_alive() -> None:
    traits = env_traits(SudokuEnv)
    assert traits["SUPPORTS_CONCURRENT_SESSIONS"] and traits["BLOCKING"]  # generation runs off the loop
    manager = SessionManager(SudokuEnv, env_name="sudoku", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"puzzle": PUZZLE})
        await manager.reset(b, {"puzzle": PUZZLE})
        await manager.step(a, {"row": 0, "col": 2, "digit": 4})
        with pytest.raises(ValidationError):
            await manager.step(a, {"row": 0, "col": 0, "digit": 5})
        assert (await manager.state(a))["board"][0] == "534.7...."
        assert (await manager.state(b))["board"][0] == "53..7...."
    finally:
        await manager.shutdown()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(SudokuEnv).run()  # run() raises on a broken check


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    namespace = exec_snippet(blocks[0], filename=README)
    assert namespace["obs"].solved and namespace["total"] == pytest.approx(1.0)  # type: ignore[attr-defined]


def test_readme_picture_is_the_puzzle_of_its_seed() -> None:
    text = README.read_text(encoding="utf-8")
    picture = [line.split()[0] for line in text.split("```\n", 2)[1].splitlines()]
    assert picture == SudokuEnv().reset(seed=1).board


def test_plugin_registration() -> None:
    from openenv_env_sudoku import plugin

    entry, _ = check_registered(plugin, "sudoku", "openenv_env_sudoku.env:SudokuEnv")
    assert entry.load() is SudokuEnv


@pytest.mark.requires_plugins("transport-ws")
@pytest.mark.slow
def test_served_errors_are_structured_and_the_server_keeps_serving(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with (served_cli("sudoku", tmp_path=tmp_path, max_sessions=4) as url,
          GenericEnvClient(url).sync() as one, GenericEnvClient(url).sync() as two):
        one.reset(puzzle=PUZZLE)
        two.reset(puzzle=PUZZLE)
        with pytest.raises(ValidationError, match="is a given") as info:
            one.step({"row": 0, "col": 0, "digit": 5})
        assert info.value.errors[0]["type"] == "cell_filled"
        with pytest.raises(ValidationError) as info:
            one.step({"row": 0, "col": 2, "digit": 10})
        assert info.value.errors[0]["loc"][-1] == "digit"
        with pytest.raises(ValidationError, match="more than one solution"):
            one.reset(puzzle="." * 81)
        penalty = two.step({"row": 0, "col": 2, "digit": 1})
        assert penalty.reward == -0.1 and penalty.observation["result"] == "wrong"
        result = one.reset(seed=3, clues=60)
        total = 0.0
        while not result.done:
            result = one.step(solve(result.observation))
            total += result.reward or 0.0
        assert result.observation["solved"] and total == pytest.approx(1.0)
