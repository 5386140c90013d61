"""Chess against a built-in opponent (or stockfish), on the ``chess`` package.

Promises (tested):

* the agent moves in UCI or SAN; an illegal or unreadable move is a ``ValidationError`` naming the
  move and listing the legal ones, and the position is unchanged;
* the opponent replies at once: ``random``, ``greedy`` (one ply, material), ``alphabeta``
  (``depth`` plies, default 2), ``stockfish`` (when on PATH) or ``auto``; ``metadata.opponent`` says
  which one plays;
* reward +1 when the agent wins, -1 when it loses, 0 for a draw and while the game goes on; after
  ``max_moves`` agent moves the game stops with ``truncated=True`` and reward 0;
* ``reset(seed=k)`` seeds the opponent's tie-breaks (and ``color="random"``): same seed, same game;
* stepping before ``reset`` or after the game ended is an ``ExecutionError`` telling you to reset.
* the declared tasks (``openenv.yaml``: ``puzzles.jsonl``, 80 ``train`` / 20 ``test`` mate-in-1/2
  positions constructed by ``tools/make_puzzles.py``) arrive from the server as
  ``reset(task=<openenv.tasks.Task>)``: the puzzle's FEN, side, defender and move budget
  (``max_moves`` = the mate's length) make the game; ``mate_in`` and ``solution`` only describe it.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import chess

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError
from openenv.snapshots import rng_state, set_rng_state
from openenv.tasks import checked_task
from openenv.types import EnvironmentMetadata
from openenv_env_chess.models import ChessAction, ChessObservation, ChessState
from openenv_env_chess.opponents import Greedy, Opponent, RandomMover, Stockfish, make_opponent

__all__ = ["ChessEnv", "parse_move"]

_COLORS = {"white": chess.WHITE, "black": chess.BLACK}
#: Keys of a puzzle's task data that describe it (for readers, tests and oracles), not reset options.
_PUZZLE_NOTES = ("mate_in", "solution")


def _name(color: chess.Color) -> str:
    return "white" if color == chess.WHITE else "black"


def parse_move(board: chess.Board, text: str) -> chess.Move:
    """The legal move ``text`` means (UCI first, then SAN); ``ValidationError`` otherwise."""
    text = text.strip()
    legal = sorted(m.uci() for m in board.legal_moves)
    try:
        move = chess.Move.from_uci(text)
    except ValueError:
        move = None
    if move is not None and move in board.legal_moves:
        return move
    if move is None:
        try:
            return board.parse_san(text)
        except chess.IllegalMoveError:
            reason = "illegal move"
        except chess.AmbiguousMoveError:
            reason = "ambiguous move"
        except ValueError:
            reason = "unreadable move (use UCI like e2e4 or SAN like Nf3)"
    else:
        reason = "illegal move"
    raise ValidationError(
        f"{reason} {text}; legal moves: {' '.join(legal)}",
        data={"errors": [{"loc": ["move"], "msg": reason, "type": "chess_move", "input": text}],
              "legal_moves": legal},
    )


def _count(name: str, value: Any) -> int:
    """An int option of ``reset`` (at least 1), refused with a ``ValidationError`` saying what fits."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a whole number of at least 1 (e.g. {name}=2), got {value!r}")
    return value


class ChessEnv(Environment[ChessAction, ChessObservation, ChessState]):
    """One game per episode. Instances share nothing; the search runs off the event loop."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the start position, the moves since, the opponent (its kind, depth and
    #: generator state) and the counters; a restore replays the moves, checking each is legal.
    SUPPORTS_SNAPSHOT = True

    def __init__(self, *, opponent: str = "greedy", depth: int = 2, color: str = "white",
                 max_moves: int = 150) -> None:
        super().__init__()
        self.default_opponent, self.default_depth, self.default_color = opponent, depth, color
        self.max_moves = max_moves
        self._board = chess.Board()
        self._opponent: Opponent | None = None
        self._agent = chess.WHITE
        self._agent_moves = 0
        self._done = False
        self._truncated = False
        self._episode_id: str | None = None
        self._last: tuple[str | None, str | None] = (None, None)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ChessObservation:
        """Start a game. Keyword options: ``opponent``, ``depth``, ``color`` (white/black/random),
        ``fen`` (a start position), ``max_moves``."""
        declared = kwargs.pop("task", None)
        if declared is not None:  # a declared task (openenv.tasks): its seed and data make the episode
            declared = checked_task(declared)
            seed = declared.seed if declared.seed is not None else seed
            kwargs = {**kwargs, **{k: v for k, v in declared.data.items() if k not in _PUZZLE_NOTES}}
        unknown = set(kwargs) - {"opponent", "depth", "color", "fen", "max_moves"}
        if unknown:
            raise ValidationError(f"unknown reset option(s) {sorted(unknown)}; accepted: opponent, depth, color, "
                                  "fen, max_moves")
        rng = random.Random(seed)
        color = str(kwargs.get("color", self.default_color))
        if color == "random":
            color = rng.choice(["white", "black"])
        if color not in _COLORS:
            raise ValidationError(f"color must be 'white', 'black' or 'random', got {color!r}")
        fen = kwargs.get("fen", chess.STARTING_FEN)
        if not isinstance(fen, str):
            raise ValidationError(f"fen must be a FEN string (e.g. {chess.STARTING_FEN!r}), got {fen!r}")
        try:
            board = chess.Board(fen)
        except ValueError as exc:
            raise ValidationError(f"invalid fen: {exc}") from None
        if not board.is_valid():
            raise ValidationError(f"invalid position: {board.status()!r}")
        try:
            opponent = make_opponent(str(kwargs.get("opponent", self.default_opponent)), rng,
                                     _count("depth", kwargs.get("depth", self.default_depth)))
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
        self.close()
        self._opponent, self._board, self._agent = opponent, board, _COLORS[color]
        self.max_moves = _count("max_moves", kwargs.get("max_moves", self.max_moves))
        self._agent_moves, self._done, self._truncated = 0, False, False
        self._episode_id = episode_id or str(uuid.uuid4())
        reply = None
        if board.turn != self._agent and not board.is_game_over():
            reply = self._opponent.choose(board)
            board.push(reply)
        self._done = board.is_game_over()
        return self._observe(None, reply)

    def step(self, action: ChessAction, timeout_s: float | None = None, **kwargs: Any) -> ChessObservation:
        if self._episode_id is None or self._opponent is None:
            raise ExecutionError("No game in progress: call reset() before step().")
        if self._done:
            raise ExecutionError("The game is over: call reset() to start a new one.")
        move = parse_move(self._board, action.move)
        self._board.push(move)
        self._agent_moves += 1
        reply = None
        if not self._board.is_game_over():
            reply = self._opponent.choose(self._board)
            self._board.push(reply)
        self._done = self._board.is_game_over()
        if not self._done and self._agent_moves >= self.max_moves:
            self._done = self._truncated = True
        return self._observe(move, reply)

    @property
    def state(self) -> ChessState:
        return ChessState(episode_id=self._episode_id, step_count=self._agent_moves, fen=self._board.fen(),
                          moves=[m.uci() for m in self._board.move_stack], agent_color=_name(self._agent),
                          opponent=self._opponent.name if self._opponent else "", done=self._done)

    def snapshot(self) -> dict[str, Any]:
        opponent = self._opponent
        kind = ("stockfish" if isinstance(opponent, Stockfish) else "random" if isinstance(opponent, RandomMover)
                else "greedy" if isinstance(opponent, Greedy) else "alphabeta")
        rng = getattr(opponent, "rng", None)
        return {"root": self._board.root().fen(), "moves": [m.uci() for m in self._board.move_stack],
                "agent": _name(self._agent), "agent_moves": self._agent_moves, "done": self._done,
                "truncated": self._truncated, "max_moves": self.max_moves, "opponent": kind,
                # stockfish searches 4 plies per requested depth (make_opponent); the others keep theirs
                "depth": (int(opponent.limit.depth or 4) // 4 if isinstance(opponent, Stockfish)
                          else getattr(opponent, "depth", 2)), "rng": rng_state(rng) if rng is not None else None,
                "last": list(self._last), "episode_id": self._episode_id}

    def restore(self, data: dict[str, Any]) -> ChessObservation:
        moves, agent, last = data.get("moves"), data.get("agent"), data.get("last")
        counts = [data.get(k) for k in ("agent_moves", "max_moves", "depth")]
        flags = [data.get(k) for k in ("done", "truncated")]
        if (not isinstance(moves, list) or agent not in _COLORS or not isinstance(last, list) or len(last) != 2
                or not all(type(n) is int and n >= 0 for n in counts) or not all(type(f) is bool for f in flags)
                or data.get("opponent") not in ("random", "greedy", "alphabeta", "stockfish")):
            raise ValueError("not a chess snapshot: moves, colour, counters or opponent missing or malformed")
        try:
            board = chess.Board(str(data.get("root")))
            for uci in moves:
                move = chess.Move.from_uci(str(uci))
                if move not in board.legal_moves:
                    raise ValueError(f"{uci} is not legal in {board.fen()}")
                board.push(move)
        except ValueError as exc:
            raise ValueError(f"not a chess snapshot: {exc}") from None
        rng = random.Random()
        if data.get("rng") is not None:
            set_rng_state(rng, data["rng"])
        opponent = make_opponent(str(data["opponent"]), rng, max(1, min(4, int(counts[2] or 1))))
        self.close()
        self._board, self._opponent, self._agent = board, opponent, _COLORS[str(agent)]
        self._agent_moves, self.max_moves = counts[0], counts[1]  # type: ignore[assignment]
        self._done, self._truncated = flags  # type: ignore[assignment]
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        agent_move, reply = (chess.Move.from_uci(m) if isinstance(m, str) else None for m in last)
        return self._observe(agent_move, reply, reward=None)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="chess", version="0.1.0",
                                   description="Chess against a built-in opponent or stockfish; +1 win, -1 loss.")

    def legal_actions(self) -> list[str]:
        return [] if self._done else sorted(m.uci() for m in self._board.legal_moves)

    def close(self) -> None:
        if self._opponent is not None:
            self._opponent.close()
            self._opponent = None

    def _observe(self, move: chess.Move | None, reply: chess.Move | None, *,
                 reward: float | None = 0.0) -> ChessObservation:
        self._last = (move.uci() if move else None, reply.uci() if reply else None)
        outcome = self._board.outcome() if self._done and not self._truncated else None
        if outcome is not None and outcome.winner is not None and reward is not None:
            reward = 1.0 if outcome.winner == self._agent else -1.0
        return ChessObservation(
            fen=self._board.fen(), board=str(self._board).replace(" ", "").splitlines(),
            agent_color=_name(self._agent), turn=_name(self._board.turn), legal_actions=self.legal_actions(),
            agent_move=move.uci() if move else None, opponent_move=reply.uci() if reply else None,
            result=outcome.result() if outcome else ("1/2-1/2" if self._truncated else None),
            termination=outcome.termination.name.lower() if outcome else ("move_limit" if self._truncated else None),
            truncated=self._truncated, reward=reward, done=self._done,
            metadata={"opponent": self._opponent.name if self._opponent else "", "agent_moves": self._agent_moves},
        )
