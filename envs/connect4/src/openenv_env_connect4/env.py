"""Connect Four against a built-in opponent: one agent drops a piece, the opponent replies in the
same step.

Dynamics (all promises are tested):

* ``reset(seed=k, opponent="heuristic" | "random", agent_first=True)``: the agent plays ``X`` and
  moves first (``agent_first=False``: the agent plays ``O`` and the opponent's first piece is already
  on the board). The opponent's choices come from a ``random.Random`` seeded from ``k`` and the
  env's name: same seed, same game for the same agent moves;
* the ``heuristic`` opponent (default) wins when it can, else blocks the agent's immediate win, else
  plays a random column; ``random`` plays any legal column;
* reward +1.0 when the agent makes four in a line (row, column or either diagonal), -1.0 when the
  opponent does, 0.0 for a full board without four (a draw) and for every other step;
* a full column, a step before ``reset()`` and a step after the game ended raise
  ``openenv.errors.ValidationError`` naming the columns that are open; a column outside 0-6 is
  refused by the action model.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499,
  the ``heuristic`` opponent, agent first) arrive from the server as
  ``reset(task=<openenv.tasks.Task>)``: the task's data names the opponent, its seed makes every
  one of the opponent's draws.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError, did_you_mean
from openenv.snapshots import rng_state, set_rng_state
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_connect4.board import Board, other
from openenv_env_connect4.models import (
    OPPONENTS,
    Connect4Action,
    Connect4Observation,
    Connect4State,
)
from openenv_env_connect4.oracle import random_move, win_block_move

__all__ = ["Connect4Env"]

_POLICIES = {"random": random_move, "heuristic": win_block_move}


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


class Connect4Env(Environment[Connect4Action, Connect4Observation, Connect4State]):
    """Connect Four, 7x6, against a built-in opponent. Instances share nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the board picture, the opponent's generator, whose turn and the counters.
    SUPPORTS_SNAPSHOT = True
    # A step is a drop, a line check and one ply of look-ahead for the opponent: run inline.
    BLOCKING = False

    def __init__(self) -> None:
        super().__init__()
        self._board = Board()
        self._rng = random.Random()
        self._opponent = "heuristic"
        self._piece = "X"
        self._opponent_column: int | None = None
        self._winner: str | None = None
        self._steps = 0
        self._episode_id: str | None = None
        self._last_column: int | None = None
        self._last_reward: float = 0.0

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Connect4Observation:
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = sorted(set(kwargs) - {"opponent", "agent_first"})
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; Connect Four accepts opponent and "
                          "agent_first", kind="unknown_option", loc=unknown[:1])
        opponent = kwargs.get("opponent", "heuristic")
        if opponent not in OPPONENTS:
            raise _refuse(f"unknown opponent {opponent!r}.{did_you_mean(str(opponent), OPPONENTS)} "
                          f"Choose one of {list(OPPONENTS)}.", kind="unknown_opponent",
                          loc=["opponent"], value=opponent)
        agent_first = kwargs.get("agent_first", True)
        if not isinstance(agent_first, bool):
            raise _refuse(f"agent_first must be true or false, got {agent_first!r}",
                          kind="bad_agent_first", loc=["agent_first"], value=agent_first)
        self._board = Board()
        # Salted with the env's name: a policy seeded with the same number (``openenv run --seed``)
        # must not draw the same stream of choices.
        self._rng = random.Random(None if seed is None else f"openenvkit-env-connect4/{seed}")
        self._opponent = opponent
        self._piece = "X" if agent_first else "O"
        self._opponent_column = None
        self._winner = None
        self._steps = 0
        self._episode_id = episode_id or str(uuid.uuid4())
        if not agent_first:
            self._opponent_column = _POLICIES[opponent](self._board, "X", self._rng)
            self._board.drop(self._opponent_column, "X")
        return self._observe(0.0)

    def step(
        self, action: Connect4Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Connect4Observation:
        if self._episode_id is None:
            raise _refuse("No game in progress: call reset() before step().", kind="no_episode")
        if self._winner is not None:
            raise _refuse(f"The game is over ({self._winner_text()}): call reset() for a new one.",
                          kind="episode_over")
        legal = self._board.legal_columns()
        if action.column not in legal:
            raise _refuse(f"column {action.column} is full; open columns: {legal}",
                          kind="column_full", loc=["column"], value=action.column)
        self._steps += 1
        row = self._board.drop(action.column, self._piece)
        if self._board.wins_at(row, action.column):
            self._winner = "agent"
            return self._observe(1.0, last=action.column)
        if self._board.is_full():
            self._winner = "draw"
            return self._observe(0.0, last=action.column)
        theirs = other(self._piece)
        col = _POLICIES[self._opponent](self._board, theirs, self._rng)
        self._opponent_column = col
        row = self._board.drop(col, theirs)
        if self._board.wins_at(row, col):
            self._winner = "opponent"
            return self._observe(-1.0, last=action.column)
        if self._board.is_full():
            self._winner = "draw"
        return self._observe(0.0, last=action.column)

    @property
    def state(self) -> Connect4State:
        return Connect4State(
            episode_id=self._episode_id, step_count=self._steps, board=self._board.render(),
            piece=self._piece, opponent=self._opponent, winner=self._winner,
            done=self._winner is not None,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"board": self._board.render(), "rng": rng_state(self._rng), "opponent": self._opponent,
                "piece": self._piece, "opponent_column": self._opponent_column, "winner": self._winner,
                "steps": self._steps, "episode_id": self._episode_id, "last_column": self._last_column}

    def restore(self, data: dict[str, Any]) -> Connect4Observation:
        opponent, piece, winner = data.get("opponent"), data.get("piece"), data.get("winner")
        steps, columns = data.get("steps"), (data.get("opponent_column"), data.get("last_column"))
        board = data.get("board")
        if (opponent not in OPPONENTS or piece not in ("X", "O") or winner not in (None, "agent", "opponent", "draw")
                or type(steps) is not int or not 0 <= steps <= 42 or not isinstance(board, list)
                or not all(c is None or (type(c) is int and 0 <= c < 7) for c in columns)):
            raise ValueError("not a connect4 snapshot: opponent, piece, winner, steps or columns out of range")
        rng = random.Random()
        set_rng_state(rng, data.get("rng"))
        self._board = Board.from_rows([str(r) for r in board])  # ValueError for a board that cannot be
        self._rng, self._opponent, self._piece, self._winner = rng, str(opponent), str(piece), winner
        self._opponent_column, self._last_column = columns
        self._steps = steps
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        return self._observe(None, last=self._last_column)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="connect4",
            description="Connect Four (7x6) against a built-in random or win/block opponent; "
            "win +1, loss -1, draw 0.",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    def _winner_text(self) -> str:
        return {"agent": "you won", "opponent": "the opponent won", "draw": "a draw"}[self._winner or "draw"]

    def _observe(self, reward: float | None, *, last: int | None = None) -> Connect4Observation:
        self._last_column = last
        done = self._winner is not None
        return Connect4Observation(
            board=self._board.render(), piece=self._piece,
            legal_actions=[] if done else [{"column": c} for c in self._board.legal_columns()],
            opponent_column=self._opponent_column, winner=self._winner,  # type: ignore[arg-type]
            reward=reward, done=done, metadata={"step": self._steps, "agent_column": last},
        )
