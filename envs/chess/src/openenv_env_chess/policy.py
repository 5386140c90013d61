"""A strong baseline for the chess env: the built-in alpha-beta search playing the agent's side."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import chess

from openenv_env_chess.models import ChessObservation
from openenv_env_chess.opponents import AlphaBeta

__all__ = ["best_move", "oracle"]


def best_move(obs: ChessObservation, depth: int = 2, seed: int = 0) -> str:
    """The move (UCI) a ``depth``-ply alpha-beta search picks in ``obs.fen``."""
    return AlphaBeta(random.Random(seed), depth).choose(chess.Board(obs.fen)).uci()


def oracle(obs: ChessObservation | Mapping[str, Any]) -> dict[str, Any]:
    """``best_move`` as the manifest's ``oracle`` (an observation dict in, an action dict out)."""
    o = obs if isinstance(obs, ChessObservation) else ChessObservation.model_validate(obs)
    return {"move": best_move(o)}
