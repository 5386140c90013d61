"""Connect Four policies: the built-in opponents and the agent's baseline.

* ``random_move`` — a uniformly random legal column;
* ``win_block_move`` — one ply: win if possible, else block the opponent's immediate win, else random;
* ``choose_move(obs)`` — the agent's baseline (beats ``random_move`` almost always): win, block,
  never hand the opponent a win on the square above, and prefer central columns.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from openenv_env_connect4.board import COLS, Board, other
from openenv_env_connect4.models import Connect4Observation

__all__ = ["best_column", "choose_move", "random_move", "win_block_move"]

#: Columns from the centre outwards: central columns take part in more lines.
_CENTRE_FIRST = sorted(range(COLS), key=lambda c: (abs(c - COLS // 2), c))


def random_move(board: Board, piece: str, rng: random.Random) -> int:
    return rng.choice(board.legal_columns())


def win_block_move(board: Board, piece: str, rng: random.Random) -> int:
    wins = board.winning_columns(piece)
    if wins:
        return wins[0]
    blocks = board.winning_columns(other(piece))
    if blocks:
        return blocks[0]
    return random_move(board, piece, rng)


def best_column(board: Board, piece: str) -> int:
    """The baseline's column for ``piece`` on ``board`` (deterministic)."""
    wins = board.winning_columns(piece)
    if wins:
        return wins[0]
    threats = board.winning_columns(other(piece))
    if threats:
        return threats[0]
    legal = board.legal_columns()
    safe = []
    for col in legal:
        board.drop(col, piece)
        gives_away = bool(board.winning_columns(other(piece)))
        board.undo(col)
        if not gives_away:
            safe.append(col)
    pool = safe or legal
    return min(pool, key=_CENTRE_FIRST.index)


def choose_move(obs: Connect4Observation | Mapping[str, Any]) -> dict[str, int]:
    """The baseline policy on an observation (or its dict): ``{"column": c}``."""
    data = obs.model_dump() if isinstance(obs, Connect4Observation) else obs
    board = Board.from_rows(data["board"])
    return {"column": best_column(board, data["piece"])}
