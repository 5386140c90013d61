"""The Connect Four board: 7 columns, 6 rows, pieces dropped from the top.

Row 0 is the bottom row. A win is four of one player's pieces in a line — a row, a column or either
diagonal — checked around the piece just dropped, so a line never wraps from one row to the next.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["COLS", "DIRECTIONS", "EMPTY", "ROWS", "Board", "other"]

COLS = 7
ROWS = 6
EMPTY = "."
#: The four line directions (row step, column step): horizontal, vertical, both diagonals.
DIRECTIONS: tuple[tuple[int, int], ...] = ((0, 1), (1, 0), (1, 1), (1, -1))


def other(piece: str) -> str:
    """The opponent's piece: ``X`` <-> ``O``."""
    return "O" if piece == "X" else "X"


class Board:
    """A 7x6 grid; ``cells[row][col]`` is ``"X"``, ``"O"`` or ``"."`` (row 0 at the bottom)."""

    def __init__(self) -> None:
        self.cells: list[list[str]] = [[EMPTY] * COLS for _ in range(ROWS)]
        self.heights: list[int] = [0] * COLS
        self.moves = 0

    @classmethod
    def from_rows(cls, rows: Sequence[str]) -> Board:
        """A board from its picture, top row first (as ``render`` draws it). Pieces must rest on
        pieces or the floor."""
        if len(rows) != ROWS or any(len(r) != COLS for r in rows):
            raise ValueError(f"a board picture is {ROWS} rows of {COLS} characters")
        board = cls()
        for r, line in enumerate(reversed(list(rows))):
            for c, ch in enumerate(line):
                if ch not in "XO.":
                    raise ValueError(f"unknown board character {ch!r}; use 'X', 'O' or '.'")
                if ch != EMPTY:
                    if board.heights[c] != r:
                        raise ValueError(f"the piece at row {r}, column {c} floats above an empty square")
                    board.cells[r][c] = ch
                    board.heights[c] += 1
                    board.moves += 1
        return board

    def copy(self) -> Board:
        board = Board()
        board.cells = [row[:] for row in self.cells]
        board.heights = self.heights[:]
        board.moves = self.moves
        return board

    def legal_columns(self) -> list[int]:
        """Columns that are not full, left to right."""
        return [c for c in range(COLS) if self.heights[c] < ROWS]

    def is_full(self) -> bool:
        return self.moves == ROWS * COLS

    def drop(self, col: int, piece: str) -> int:
        """Drop ``piece`` into ``col``; returns the row it landed on. ``ValueError`` when the
        column is full or does not exist."""
        if not 0 <= col < COLS:
            raise ValueError(f"column {col} does not exist; columns are 0 to {COLS - 1}")
        row = self.heights[col]
        if row >= ROWS:
            raise ValueError(f"column {col} is full")
        self.cells[row][col] = piece
        self.heights[col] += 1
        self.moves += 1
        return row

    def undo(self, col: int) -> None:
        """Take the top piece out of ``col`` (for look-ahead)."""
        self.heights[col] -= 1
        self.cells[self.heights[col]][col] = EMPTY
        self.moves -= 1

    def wins_at(self, row: int, col: int) -> bool:
        """Whether the piece at (row, col) is part of four in a line."""
        piece = self.cells[row][col]
        if piece == EMPTY:
            return False
        for dr, dc in DIRECTIONS:
            count = 1
            for sign in (1, -1):
                r, c = row + sign * dr, col + sign * dc
                while 0 <= r < ROWS and 0 <= c < COLS and self.cells[r][c] == piece:
                    count += 1
                    r, c = r + sign * dr, c + sign * dc
            if count >= 4:
                return True
        return False

    def winning_columns(self, piece: str) -> list[int]:
        """Columns where dropping ``piece`` now makes four in a line."""
        out = []
        for col in self.legal_columns():
            row = self.drop(col, piece)
            if self.wins_at(row, col):
                out.append(col)
            self.undo(col)
        return out

    def render(self) -> list[str]:
        """The board, top row first: ``"X"``, ``"O"``, ``"."``."""
        return ["".join(self.cells[r]) for r in range(ROWS - 1, -1, -1)]
