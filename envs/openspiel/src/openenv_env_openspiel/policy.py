"""A strong baseline for the OpenSpiel env: exact minimax for small deterministic two-player games.

``minimax_action(obs)`` replays ``obs.history`` in a fresh state of ``obs.game`` and searches the
whole game tree (with a transposition table), so it plays tic-tac-toe perfectly. It refuses games
with chance nodes or more than two players.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyspiel

from openenv_env_openspiel.models import OpenSpielObservation

__all__ = ["minimax_action", "oracle"]


def minimax_action(obs: OpenSpielObservation) -> int:
    game = pyspiel.load_game(obs.game)
    if game.num_players() != 2 or game.get_type().chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        raise ValueError(f"minimax_action needs a deterministic two-player game, not {obs.game}")
    state = game.new_initial_state()
    for action in obs.history:
        state.apply_action(action)
    player = state.current_player()
    table: dict[str, float] = {}
    best = max(state.legal_actions(), key=lambda a: (_value(state.child(a), player, table), -a))
    return int(best)


def _value(state: Any, player: int, table: dict[str, float]) -> float:
    """The game value for ``player`` under perfect play from ``state``."""
    if state.is_terminal():
        return float(state.returns()[player])
    key = str(state) + str(state.current_player())
    if key not in table:
        values = [_value(state.child(a), player, table) for a in state.legal_actions()]
        table[key] = max(values) if state.current_player() == player else min(values)
    return table[key]


def oracle(obs: OpenSpielObservation | Mapping[str, Any]) -> dict[str, Any]:
    """``minimax_action`` as the manifest's ``oracle`` (an observation dict in, an action dict out)."""
    o = obs if isinstance(obs, OpenSpielObservation) else OpenSpielObservation.model_validate(obs)
    return {"action": minimax_action(o)}
