"""Connect Four: lines in every direction (and no false wins), draws, opponents, seeds, bad input,
the baseline, the README and serving."""

from __future__ import annotations

import json
import random
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
from openenv_env_connect4 import Board, Connect4Action, Connect4Env
from openenv_env_connect4 import env as env_module
from openenv_env_connect4.oracle import choose_move, win_block_move

README = Path(__file__).resolve().parents[1] / "README.md"
#: A full board without four in a line, bottom row first.
DRAW_ROWS = ["XXOOXXO", "OOXXOOX", "XXOOXXO", "OOXXOOX", "XXOOXXO", "OOXXOOX"]


def all_lines() -> list[list[tuple[int, int]]]:
    """Every run of four squares on the board, by brute force over starts and directions."""
    lines = []
    for r in range(6):
        for c in range(7):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + k * dr, c + k * dc) for k in range(4)]
                if all(0 <= rr < 6 and 0 <= cc < 7 for rr, cc in cells):
                    lines.append(cells)
    return lines


def brute_force_winner(board: Board) -> set[str]:
    return {board.cells[line[0][0]][line[0][1]] for line in all_lines()
            if board.cells[line[0][0]][line[0][1]] != "." and len({board.cells[r][c] for r, c in line}) == 1}


def test_there_are_69_lines_and_each_one_wins_from_every_square() -> None:
    lines = all_lines()
    assert len(lines) == 69  # 24 horizontal, 21 vertical, 12 + 12 diagonal
    for line in lines:
        for piece in "XO":
            board = Board()
            board.cells = [["."] * 7 for _ in range(6)]
            for r, c in line:
                board.cells[r][c] = piece
            for r, c in line:  # whichever of the four was placed last, the win is seen
                assert board.wins_at(r, c), (line, (r, c))
            # Three of the four are not a win.
            r0, c0 = line[0]
            board.cells[r0][c0] = "."
            assert not any(board.wins_at(r, c) for r, c in line[1:]), line


def test_wins_by_play_in_every_direction() -> None:
    cases = {
        "row": [0, 0, 1, 1, 2, 2, 3],
        "column": [4, 5, 4, 5, 4, 5, 4],
        "rising diagonal": [0, 1, 1, 2, 2, 3, 2, 3, 3, 6, 3],
        "falling diagonal": [6, 5, 5, 4, 4, 3, 4, 3, 3, 0, 3],
    }
    for name, moves in cases.items():
        board, piece = Board(), "X"
        for i, col in enumerate(moves):
            row = board.drop(col, piece)
            won = board.wins_at(row, col)
            assert won == (i == len(moves) - 1), (name, i)
            piece = "O" if piece == "X" else "X"
        assert brute_force_winner(board) == {"X"}, name


def test_no_false_wins_across_row_ends_or_gaps() -> None:
    # Four X's in reading order across the end of a row (cols 5, 6 of row 0; 0, 1 of row 1).
    board = Board.from_rows([".......", ".......", ".......", ".......", "XX...OO", "OOO..XX"])
    assert not any(board.wins_at(r, c) for r in range(6) for c in range(7))
    assert brute_force_winner(board) == set()
    # A gap in the middle of a row, a column broken by the other player, a diagonal of mixed pieces.
    for rows in (["......."] * 5 + ["XX.XX.."],
                 ["......."] * 1 + ["X......", "X......", "O......", "X......", "X......"],
                 ["......."] * 2 + ["...X...", "..OO...", ".XOO...", "XOOX..."]):
        board = Board.from_rows(rows)
        assert not any(board.wins_at(r, c) for r in range(6) for c in range(7)), rows


def test_incremental_check_agrees_with_brute_force_on_random_games() -> None:
    rng = random.Random(0)
    for _ in range(300):
        board, piece = Board(), "X"
        while not board.is_full():
            col = rng.choice(board.legal_columns())
            row = board.drop(col, piece)
            if board.wins_at(row, col):
                assert brute_force_winner(board) == {piece}
                break
            assert brute_force_winner(board) == set()
            piece = "O" if piece == "X" else "X"


def draw_order() -> list[int]:
    """An alternating X/O drop order that builds DRAW_ROWS (depth-first search)."""
    target = [[DRAW_ROWS[r][c] for c in range(7)] for r in range(6)]
    heights = [0] * 7
    order: list[int] = []

    def search(piece: str) -> bool:
        if len(order) == 42:
            return True
        for col in range(7):
            if heights[col] < 6 and target[heights[col]][col] == piece:
                heights[col] += 1
                order.append(col)
                if search("O" if piece == "X" else "X"):
                    return True
                order.pop()
                heights[col] -= 1
        return False

    assert search("X")
    return order


def test_a_full_board_without_four_is_a_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    order = draw_order()
    board = Board()
    for i, col in enumerate(order):
        row = board.drop(col, "XO"[i % 2])
        assert not board.wins_at(row, col)
    assert board.is_full() and board.legal_columns() == [] and brute_force_winner(board) == set()
    with pytest.raises(ValueError, match="full"):
        board.drop(0, "X")
    # Through the env, with the opponent scripted to play O's half of the order.
    replies = iter(order[1::2])
    monkeypatch.setitem(env_module._POLICIES, "random", lambda board, piece, rng: next(replies))
    env = Connect4Env()
    obs = env.reset(seed=0, opponent="random")
    for col in order[0::2]:
        obs = env.step(Connect4Action(column=col))
    assert obs.done and obs.winner == "draw" and obs.reward == 0.0 and obs.legal_actions == []
    assert obs.board == DRAW_ROWS[::-1]


def test_agent_win_and_loss_rewards() -> None:
    env = Connect4Env()
    # The random opponent, seed 0: the agent stacks column 3 until the game ends either way.
    outcomes = set()
    for seed in range(40):
        obs = env.reset(seed=seed, opponent="random")
        while not obs.done:
            col = 3 if {"column": 3} in obs.legal_actions else obs.legal_actions[0]["column"]
            obs = env.step(Connect4Action(column=col))
        assert obs.reward == {"agent": 1.0, "opponent": -1.0, "draw": 0.0}[obs.winner]
        assert env.state.done and env.state.winner == obs.winner
        outcomes.add(obs.winner)
    assert {"agent", "opponent"} <= outcomes


def test_heuristic_opponent_wins_and_blocks() -> None:
    rng = random.Random(0)
    board = Board.from_rows(["......."] * 3 + ["O......", "OX.....", "OXX...."])
    assert win_block_move(board, "O", rng) == 0  # its own win first
    board = Board.from_rows(["......."] * 4 + ["O......", "OXXX..."])
    assert win_block_move(board, "O", rng) == 4  # else the block
    # In play: whenever the agent has three stacked in column 3, the heuristic opponent caps it.
    env, checked = Connect4Env(), 0
    for seed in range(20):
        obs = env.reset(seed=seed, opponent="heuristic")
        for _ in range(3):
            obs = env.step(Connect4Action(column=3))
        column = [row[3] for row in reversed(obs.board)]
        if column[:3] == ["X", "X", "X"]:
            assert obs.opponent_column == 3 and column[3] == "O" and not obs.done
            checked += 1
    assert checked > 5


def test_agent_second_plays_o_after_the_opponents_first_piece() -> None:
    env = Connect4Env()
    obs = env.reset(seed=3, agent_first=False, opponent="random")
    assert obs.piece == "O" and sum(row.count("X") for row in obs.board) == 1
    assert obs.opponent_column is not None and obs.board[-1][obs.opponent_column] == "X"


def test_baseline_beats_both_opponents() -> None:
    env = Connect4Env()
    for opponent, needed in (("random", 40), ("heuristic", 30)):
        wins = 0
        for seed in range(40):
            obs = env.reset(seed=seed, opponent=opponent, agent_first=seed % 2 == 0)
            while not obs.done:
                obs = env.step(Connect4Action(**choose_move(obs.model_dump())))
            wins += obs.winner == "agent"
        assert wins >= needed, (opponent, wins)


def test_same_seed_same_game() -> None:
    def game(seed: int) -> list[list[str]]:
        env = Connect4Env()
        obs = env.reset(seed=seed, opponent="random")
        boards = [obs.board]
        while not obs.done:
            obs = env.step(Connect4Action(column=obs.legal_actions[0]["column"]))
            boards.append(obs.board)
        return boards

    assert game(9) == game(9)
    assert len({json.dumps(game(s)) for s in range(6)}) > 1


def test_bad_input_is_a_structured_error(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Connect4Env()
    with pytest.raises(ValidationError, match="reset"):
        env.step(Connect4Action(column=0))
    for bad in (7, -1, "three"):
        with pytest.raises(ValueError):
            Connect4Action.model_validate({"column": bad})
    with pytest.raises(ValidationError, match="Did you mean 'random'") as info:
        env.reset(opponent="randon")
    assert info.value.errors[0]["loc"] == ["opponent"]
    with pytest.raises(ValidationError, match="accepts opponent"):
        env.reset(level=3)
    with pytest.raises(ValidationError, match="agent_first"):
        env.reset(agent_first="yes")
    # An opponent scripted to answer in the same column: column 0 fills X, O, X, O, X, O.
    monkeypatch.setitem(env_module._POLICIES, "random", lambda board, piece, rng: board.legal_columns()[0])
    env.reset(seed=1, opponent="random")
    for _ in range(3):
        obs = env.step(Connect4Action(column=0))
    assert not obs.done and [row[0] for row in obs.board] == list("OXOXOX")
    with pytest.raises(ValidationError, match="column 0 is full; open columns: \\[1, 2, 3, 4, 5, 6\\]") as info:
        env.step(Connect4Action(column=0))
    assert info.value.errors[0]["type"] == "column_full" and env.state.step_count == 3
    while not obs.done:
        obs = env.step(Connect4Action(column=obs.legal_actions[0]["column"]))
    with pytest.raises(ValidationError, match="game is over") as info:
        env.step(Connect4Action(column=3))
    assert info.value.errors[0]["type"] == "episode_over"


async def test_sessions_are_independent_and_errors_keep_them_alive() -> None:
    traits = env_traits(Connect4Env)
    assert traits["SUPPORTS_CONCURRENT_SESSIONS"] and not traits["BLOCKING"]
    manager = SessionManager(Connect4Env, env_name="connect4", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1})
        await manager.reset(b, {"seed": 1})
        await manager.step(a, {"column": 3})
        with pytest.raises(ValidationError):
            await manager.step(a, {"column": 9})
        assert (await manager.state(a))["step_count"] == 1
        assert (await manager.state(b))["board"] == ["......."] * 6
    finally:
        await manager.shutdown()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(Connect4Env).run()  # run() raises on a broken check


def test_readme_example_runs() -> None:
    blocks = readme_snippets(README)
    assert len(blocks) == 1
    namespace = exec_snippet(blocks[0], filename=README)
    assert namespace["obs"].winner == "agent"  # type: ignore[attr-defined]


def test_plugin_registration() -> None:
    from openenv_env_connect4 import plugin

    entry, _ = check_registered(plugin, "connect4", "openenv_env_connect4.env:Connect4Env")
    assert entry.load() is Connect4Env


@pytest.mark.requires_plugins("transport-ws")
@pytest.mark.slow
def test_served_errors_are_structured_and_the_server_keeps_serving(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with served_cli("connect4", tmp_path=tmp_path, max_sessions=4) as url, GenericEnvClient(url).sync() as one, \
            GenericEnvClient(url).sync() as two:
        two.reset(seed=1)
        with pytest.raises(ValidationError, match="Did you mean 'random'") as info:
            one.reset(opponent="randon")
        assert info.value.errors[0]["type"] == "unknown_opponent"
        result = one.reset(seed=1, opponent="random")
        with pytest.raises(ValidationError) as info:
            one.step({"column": 7})
        assert info.value.errors[0]["loc"][-1] == "column"
        while not result.done:
            result = one.step(choose_move(result.observation))
        assert result.observation["winner"] == "agent" and result.reward == 1.0
        with pytest.raises(ValidationError, match="game is over"):
            one.step({"column": 3})
        assert two.step({"column": 3}).observation["board"][-1][3] == "X"
