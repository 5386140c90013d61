"""Build ``src/openenv_env_chess/puzzles.jsonl``: mate-in-1 and mate-in-2 positions for the chess env's tasks.

The positions are constructed here, not taken from any database: seeded random games (captures
preferred, so that material thins out) are scanned for positions where the side to move has a
forced mate in one or two moves that is not shorter; python-chess proves each one by exhaustive
search (every defence is tried). ``tests/test_tasks.py`` proves them again from the shipped file.
Run: ``uv run --all-packages python envs/chess/tools/make_puzzles.py``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import chess

OUT = Path(__file__).resolve().parents[1] / "src" / "openenv_env_chess" / "puzzles.jsonl"
WANT = {1: 60, 2: 40}
TEST_SHARE = 5  # every fifth puzzle of each kind goes to the test split


def mates_in_one(board: chess.Board) -> list[chess.Move]:
    found = []
    for move in board.legal_moves:
        board.push(move)
        if board.is_checkmate():
            found.append(move)
        board.pop()
    return found


def mate_in_two(board: chess.Board) -> list[chess.Move] | None:
    """A first move after which every reply allows a mate (the main line: first, reply, mate)."""
    for move in sorted(board.legal_moves, key=lambda m: (not board.gives_check(m), m.uci())):
        board.push(move)
        if board.is_game_over():
            board.pop()
            continue
        line: list[chess.Move] | None = [move]
        for reply in board.legal_moves:
            board.push(reply)
            finish = mates_in_one(board)
            board.pop()
            if not finish:
                line = None
                break
            if len(line) == 1:
                line += [reply, finish[0]]
        board.pop()
        if line is not None:
            return line
    return None


def random_game(rng: random.Random, plies: int) -> list[chess.Board]:
    board, seen = chess.Board(), []
    for _ in range(plies):
        moves = list(board.legal_moves)
        if not moves or board.is_game_over():
            break
        captures = [m for m in moves if board.is_capture(m)]
        board.push(rng.choice(captures if captures and rng.random() < 0.7 else moves))
        if board.is_game_over():
            break
        seen.append(board.copy(stack=False))
    return seen


def main() -> int:
    rng = random.Random(20261204)
    found: dict[int, list[dict[str, object]]] = {1: [], 2: []}
    fens: set[str] = set()
    games = 0
    while any(len(found[n]) < WANT[n] for n in WANT) and games < 20_000:
        games += 1
        for board in random_game(rng, rng.randrange(20, 120))[10:]:
            key = board.board_fen() + (" w" if board.turn else " b")
            if key in fens or rng.random() < 0.5:
                continue
            one = mates_in_one(board)
            if one and len(found[1]) < WANT[1]:
                fens.add(key)
                found[1].append({"fen": board.fen(), "solution": [one[0].uci()]})
                break
            if not one and len(found[2]) < WANT[2] and len(list(board.legal_moves)) <= 40:
                line = mate_in_two(board)
                if line is not None:
                    fens.add(key)
                    found[2].append({"fen": board.fen(), "solution": [m.uci() for m in line]})
                    break
    rows = []
    for mate_in, puzzles in found.items():
        for number, puzzle in enumerate(puzzles):
            split = "test" if number % TEST_SHARE == TEST_SHARE - 1 else "train"
            board = chess.Board(str(puzzle["fen"]))
            rows.append({"id": f"mate{mate_in}-{number:03d}", "split": split, "fen": puzzle["fen"],
                         "color": "white" if board.turn else "black", "max_moves": mate_in,
                         # a fixed, seeded defender: "auto" would be stockfish on some machines only
                         "opponent": "alphabeta", "depth": 2,
                         "mate_in": mate_in, "solution": puzzle["solution"]})
    OUT.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    print(f"{len(rows)} puzzles from {games} games -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
