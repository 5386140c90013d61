"""The sudoku env as an ASGI app, for ``uvicorn openenv_env_sudoku.server.app:app``.

Built on import with every installed transport; ``openenv serve sudoku`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_sudoku.env import SudokuEnv

__all__ = ["app"]

app = create_app(SudokuEnv, max_sessions=64, env_name="sudoku")
