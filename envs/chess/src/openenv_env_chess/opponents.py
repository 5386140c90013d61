"""The chess env's opponents: random, one-ply material greedy, alpha-beta depth N, stockfish.

Every built-in opponent is deterministic given its ``random.Random`` (ties are broken by it), so a
seeded episode replays exactly. ``stockfish`` is used only when the binary is on ``PATH``.
"""

from __future__ import annotations

import random
import shutil
from typing import Protocol

import chess

__all__ = ["OPPONENTS", "AlphaBeta", "Greedy", "Opponent", "RandomMover", "Stockfish", "evaluate",
           "make_opponent", "stockfish_path"]

#: Names accepted by ``make_opponent`` (``auto`` = stockfish when installed, else alphabeta).
OPPONENTS = ("random", "greedy", "alphabeta", "stockfish", "auto")

_VALUES = {chess.PAWN: 100, chess.KNIGHT: 320, chess.BISHOP: 330, chess.ROOK: 500, chess.QUEEN: 900,
           chess.KING: 0}
_MATE = 1_000_000


class Opponent(Protocol):
    name: str

    def choose(self, board: chess.Board) -> chess.Move: ...

    def close(self) -> None: ...


def evaluate(board: chess.Board, color: chess.Color) -> int:
    """Material from ``color``'s side, plus a mop-up term that drives a lone king to the edge."""
    if board.is_checkmate():
        return -_MATE if board.turn == color else _MATE
    if board.is_stalemate() or board.is_insufficient_material():
        return 0
    score = 0
    for piece_type, value in _VALUES.items():
        score += value * (len(board.pieces(piece_type, color)) - len(board.pieces(piece_type, not color)))
    if score > 300:  # winning: push the enemy king away from the centre and bring ours close
        theirs, ours = board.king(not color), board.king(color)
        if theirs is not None and ours is not None:
            file, rank = chess.square_file(theirs), chess.square_rank(theirs)
            centre = max(3 - file, file - 4) + max(3 - rank, rank - 4)
            score += 10 * centre + 4 * (14 - chess.square_distance(theirs, ours) * 2)
    return score


def _ordered(board: chess.Board) -> list[chess.Move]:
    """Captures and promotions first (better pruning), in a stable order."""
    moves = list(board.legal_moves)
    moves.sort(key=lambda m: (not board.is_capture(m), m.promotion is None, m.uci()))
    return moves


class RandomMover:
    """A uniformly random legal move."""

    name = "random"

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def choose(self, board: chess.Board) -> chess.Move:
        return self.rng.choice(sorted(board.legal_moves, key=lambda m: m.uci()))

    def close(self) -> None:
        return None


class AlphaBeta:
    """Negamax with alpha-beta pruning to ``depth`` plies over ``evaluate``; ties broken by ``rng``."""

    def __init__(self, rng: random.Random, depth: int = 2) -> None:
        if not 1 <= depth <= 4:
            raise ValueError(f"alphabeta depth must be 1..4, got {depth}")
        self.rng, self.depth = rng, depth
        self.name = f"alphabeta(depth={depth})"

    def choose(self, board: chess.Board) -> chess.Move:
        color = board.turn
        best: list[chess.Move] = []
        best_score = -_MATE * 2
        for move in _ordered(board):
            board.push(move)
            score = -self._search(board, self.depth - 1, -_MATE * 2, -best_score + 1, not color)
            board.pop()
            if score > best_score:
                best_score, best = score, [move]
            elif score == best_score:
                best.append(move)
        return self.rng.choice(best)

    def close(self) -> None:
        return None

    def _search(self, board: chess.Board, depth: int, alpha: int, beta: int, color: chess.Color) -> int:
        if depth == 0 or board.is_game_over(claim_draw=False):
            score = evaluate(board, color)
            # Prefer the quicker mate: a mate found with more depth left is worth more.
            return score + depth if score >= _MATE else score - depth if score <= -_MATE else score
        value = -_MATE * 2
        for move in _ordered(board):
            board.push(move)
            value = max(value, -self._search(board, depth - 1, -beta, -alpha, not color))
            board.pop()
            alpha = max(alpha, value)
            if alpha >= beta:
                break
        return value


class Greedy(AlphaBeta):
    """One ply: the move that leaves the most material (a mate in one first)."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__(rng, depth=1)
        self.name = "greedy"


def stockfish_path() -> str | None:
    """Where ``stockfish`` is on ``PATH`` (Debian installs it as /usr/games/stockfish), or None."""
    return shutil.which("stockfish") or shutil.which("stockfish", path="/usr/games")


class Stockfish:
    """The stockfish engine over UCI, ``time_s`` seconds (or ``depth``) per move."""

    def __init__(self, path: str, *, depth: int = 8, seed: int | None = None) -> None:
        import chess.engine

        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.limit = chess.engine.Limit(depth=depth)
        self.name = f"stockfish(depth={depth})"

    def choose(self, board: chess.Board) -> chess.Move:
        move = self.engine.play(board, self.limit).move
        if move is None:
            raise RuntimeError("stockfish returned no move")
        return move

    def close(self) -> None:
        self.engine.quit()


def make_opponent(name: str, rng: random.Random, depth: int = 2) -> Opponent:
    """Build the opponent called ``name`` (one of ``OPPONENTS``); ``ValueError`` says what exists."""
    if name == "auto":
        name = "stockfish" if stockfish_path() else "alphabeta"
    if name == "random":
        return RandomMover(rng)
    if name == "greedy":
        return Greedy(rng)
    if name == "alphabeta":
        return AlphaBeta(rng, depth)
    if name == "stockfish":
        path = stockfish_path()
        if path is None:
            raise ValueError("opponent 'stockfish' needs the stockfish binary on PATH (Debian: apt-get install "
                             "stockfish); use opponent='alphabeta' for the built-in search")
        return Stockfish(path, depth=max(depth, 1) * 4)
    from openenv.errors import did_you_mean

    raise ValueError(f"unknown opponent {name!r}.{did_you_mean(name, OPPONENTS)} Choose one of {', '.join(OPPONENTS)}")
