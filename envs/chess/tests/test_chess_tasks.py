"""The chess env's declared tasks: constructed mate-in-1/2 puzzles, each proven here and played.

Every shipped position is proven with python-chess by exhaustive search (a mate in N exists and
none shorter, against every defence), then played through ``reset(task=...)`` against the env's
own defender: mating within the puzzle's move budget must win (+1).
"""

from __future__ import annotations

import chess
import pytest

from openenv.tasks import tasks_of
from openenv_env_chess.env import ChessEnv
from openenv_env_chess.models import ChessAction

SOURCE = tasks_of(ChessEnv)
assert SOURCE is not None
PUZZLES = list(SOURCE.iter_tasks())


def _mate_in_one(board: chess.Board) -> chess.Move | None:
    for move in board.legal_moves:
        board.push(move)
        mate = board.is_checkmate()
        board.pop()
        if mate:
            return move
    return None


def _forces_mate_in_two(board: chess.Board, first: chess.Move) -> bool:
    board.push(first)
    try:
        if board.is_game_over():
            return False
        for reply in list(board.legal_moves):
            board.push(reply)
            found = _mate_in_one(board)
            board.pop()
            if found is None:
                return False
        return True
    finally:
        board.pop()


def test_a_hundred_puzzles_eighty_train_twenty_test_both_kinds_in_both() -> None:
    assert SOURCE is not None
    assert {s.name: s.num_tasks for s in SOURCE.splits()} == {"train": 80, "test": 20}
    kinds = {(t.split, t.data["mate_in"]) for t in PUZZLES}
    assert kinds == {("train", 1), ("train", 2), ("test", 1), ("test", 2)}
    assert len({chess.Board(t.data["fen"]).board_fen() for t in PUZZLES}) == len(PUZZLES)


@pytest.mark.parametrize("task", PUZZLES, ids=[t.id for t in PUZZLES])
def test_the_puzzle_is_a_forced_mate_of_its_length_and_its_solution_is_one(task: object) -> None:
    data = task.data  # type: ignore[attr-defined]
    board = chess.Board(data["fen"])
    assert board.is_valid() and data["color"] == ("white" if board.turn else "black")
    assert data["max_moves"] == data["mate_in"] and data["opponent"] == "alphabeta"
    line = [chess.Move.from_uci(m) for m in data["solution"]]
    if data["mate_in"] == 1:
        board.push(line[0])
        assert board.is_checkmate()
    else:
        assert _mate_in_one(board) is None and _forces_mate_in_two(board, line[0])


@pytest.mark.parametrize("task", PUZZLES[::7], ids=[t.id for t in PUZZLES[::7]])
def test_playing_the_mate_through_reset_task_wins_against_the_envs_defender(task: object) -> None:
    data = task.data  # type: ignore[attr-defined]
    env = ChessEnv()
    obs = env.reset(seed=0, task=task)
    assert obs.fen == data["fen"] and obs.agent_color == data["color"]
    obs = env.step(ChessAction(move=data["solution"][0]))
    if data["mate_in"] == 2:
        assert not obs.done
        finish = _mate_in_one(chess.Board(obs.fen))
        assert finish is not None, "the defender found a way out of a proven mate"
        obs = env.step(ChessAction(move=finish.uci()))
    assert obs.done and obs.reward == 1.0
