"""Any OpenSpiel game by name, the agent playing one seat against scripted, seeded opponents.

Promises (tested):

* ``reset(game="tic_tac_toe", params={...})`` loads any game in ``pyspiel.registered_names()``
  (an OpenSpiel game string such as ``"kuhn_poker(players=3)"`` works too); an unknown name is a
  ``ValidationError`` with a did-you-mean; simultaneous-move games are played turn-based;
* the agent plays ``agent_player`` (default 0); every other player is scripted: ``random`` (a seeded
  uniform choice) or ``first`` (the lowest legal action id); chance nodes are sampled by their
  probabilities with the same seeded RNG, so the same seed gives the same episode;
* in games that are not perfect-information (poker, blackjack, simultaneous moves) ``history`` and
  ``others`` stay empty until the game ends, so hidden cards and simultaneous choices do not leak;
  the agent sees what its player may know through ``observation``;
* an action is an id or its name; an illegal one is a ``ValidationError`` listing the legal ones;
* the reward is the change in the agent player's return since its previous move, so the rewards
  of an episode add up to the agent's final return; ``max_steps`` agent moves truncate the game;
* stepping before ``reset`` or after the end is an ``ExecutionError`` telling you to reset.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499,
  the ``random`` opponent) are seeds of the game the server plays; they arrive as
  ``reset(task=<openenv.tasks.Task>)``: the seed makes chance and every opponent draw.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pyspiel

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError, did_you_mean
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_openspiel.models import OpenSpielAction, OpenSpielObservation, OpenSpielState

__all__ = ["OPPONENTS", "OpenSpielEnv", "load_game"]

OPPONENTS = ("random", "first")


def load_game(name: str, params: dict[str, Any] | None = None) -> Any:
    """The pyspiel game ``name`` (with ``params``), turn-based; ``ValidationError`` for bad names/params."""
    base = name.split("(", 1)[0]
    known = pyspiel.registered_names()
    if base not in known:
        raise ValidationError(f"unknown OpenSpiel game {name!r}.{did_you_mean(base, known)} "
                              f"{len(known)} games are registered, e.g. tic_tac_toe, kuhn_poker, blackjack, "
                              "connect_four, leduc_poker")
    try:
        game = pyspiel.load_game(name, params) if params else pyspiel.load_game(name)
    except (pyspiel.SpielError, RuntimeError, TypeError, ValueError) as exc:
        raise ValidationError(f"cannot load game {name!r} with params {params or {}}: {exc}") from None
    if game.get_type().dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        game = pyspiel.convert_to_turn_based(game)
    return game


def _count(name: str, value: Any) -> int:
    """An int option of ``reset`` (at least 1), refused with a ``ValidationError`` saying what fits."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a whole number of at least 1 (e.g. {name}=100), got {value!r}")
    return value


class OpenSpielEnv(Environment[OpenSpielAction, OpenSpielObservation, OpenSpielState]):
    """One OpenSpiel game per episode. Instances share nothing (pyspiel games are immutable)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, *, game: str = "tic_tac_toe", opponent: str = "random", max_steps: int = 1000) -> None:
        super().__init__()
        self.default_game, self.default_opponent, self.max_steps = game, opponent, max_steps
        self._game: Any = None
        self._state: Any = None
        self._agent = 0
        self._opponent = opponent
        self._rng = random.Random()
        self._last_return = 0.0
        self._steps = 0
        self._truncated = False
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> OpenSpielObservation:
        """Start a game. Keyword options: ``game``, ``params``, ``agent_player``, ``opponent``, ``max_steps``."""
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = set(kwargs) - {"game", "params", "agent_player", "opponent", "max_steps"}
        if unknown:
            raise ValidationError(f"unknown reset option(s) {sorted(unknown)}; accepted: game, params, "
                                  "agent_player, opponent, max_steps")
        params = kwargs.get("params")
        if params is not None and not isinstance(params, dict):
            raise ValidationError(f"params must be a mapping of game parameters, got {type(params).__name__}")
        game = load_game(str(kwargs.get("game", self.default_game)), params)
        opponent = str(kwargs.get("opponent", self.default_opponent))
        if opponent not in OPPONENTS:
            raise ValidationError(f"unknown opponent {opponent!r}.{did_you_mean(opponent, OPPONENTS)} "
                                  f"Choose one of {', '.join(OPPONENTS)}")
        agent = kwargs.get("agent_player", 0)
        if not isinstance(agent, int) or not 0 <= agent < game.num_players():
            raise ValidationError(f"agent_player must be 0..{game.num_players() - 1} for {game}, got {agent!r}")
        self._game, self._state, self._agent, self._opponent = game, game.new_initial_state(), agent, opponent
        self.max_steps = _count("max_steps", kwargs.get("max_steps", self.max_steps))
        self._rng = random.Random(seed)
        self._last_return, self._steps, self._truncated = 0.0, 0, False
        self._episode_id = episode_id or str(uuid.uuid4())
        others = self._advance()
        return self._observe(others)

    def step(self, action: OpenSpielAction, timeout_s: float | None = None, **kwargs: Any) -> OpenSpielObservation:
        if self._state is None:
            raise ExecutionError("No game in progress: call reset() before step().")
        if self._done():
            raise ExecutionError("The game is over: call reset() to start a new one.")
        self._state.apply_action(self._resolve(action.action))
        self._steps += 1
        others = self._advance()
        if not self._state.is_terminal() and self._steps >= self.max_steps:
            self._truncated = True
        return self._observe(others)

    @property
    def state(self) -> OpenSpielState:
        """The full history, hidden moves included (for replays and debugging, not for the agent)."""
        return OpenSpielState(
            episode_id=self._episode_id, step_count=self._steps, game=str(self._game) if self._game else "",
            history=list(self._state.history()) if self._state else [], agent_player=self._agent,
            opponent=self._opponent, done=self._state is not None and self._done(),
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="openspiel", version="0.1.0",
                                   description="Any OpenSpiel game by name against scripted seeded opponents.")

    # -- helpers ----------------------------------------------------------------------------------

    def _done(self) -> bool:
        return bool(self._state.is_terminal()) or self._truncated

    def _resolve(self, action: int | str) -> int:
        legal = self._state.legal_actions()
        names = [self._state.action_to_string(self._agent, a) for a in legal]
        if isinstance(action, str):
            if action in names:
                return int(legal[names.index(action)])
            if action.lstrip("-").isdigit() and int(action) in legal:
                return int(action)
        elif action in legal:
            return int(action)
        listing = ", ".join(f"{a} ({n})" for a, n in zip(legal, names, strict=True))
        hint = did_you_mean(action, names) if isinstance(action, str) else ""
        raise ValidationError(
            f"illegal action {action!r}.{hint} Legal actions: {listing}",
            data={"errors": [{"loc": ["action"], "msg": "illegal action", "type": "openspiel_action",
                              "input": action}], "legal_actions": list(legal), "legal_action_names": names},
        )

    def _advance(self) -> list[dict[str, Any]]:
        """Play chance and opponents until it is the agent's turn or the game ends."""
        state, rng, moves = self._state, self._rng, []
        while not state.is_terminal() and state.current_player() != self._agent:
            player = state.current_player()
            if state.is_chance_node():
                outcomes, probs = zip(*state.chance_outcomes(), strict=True)
                action = rng.choices(outcomes, weights=probs)[0]
            else:
                legal = state.legal_actions()
                action = legal[0] if self._opponent == "first" else rng.choice(legal)
            moves.append({"player": int(player), "action": int(action),
                          "name": state.action_to_string(player, action)})
            state.apply_action(action)
        return moves

    def _observe(self, others: list[dict[str, Any]]) -> OpenSpielObservation:
        state, game, done = self._state, self._game, self._done()
        returns = [float(r) for r in state.returns()]
        reward = returns[self._agent] - self._last_return
        self._last_return = returns[self._agent]
        legal = [] if done else [int(a) for a in state.legal_actions()]
        kind = game.get_type()
        public = done or kind.information == pyspiel.GameType.Information.PERFECT_INFORMATION
        if kind.provides_observation_string:
            seen = state.observation_string(self._agent)
        elif kind.provides_information_state_string:
            seen = state.information_state_string(self._agent)
        else:
            seen = str(state)
        return OpenSpielObservation(
            game=str(game), agent_player=self._agent, current_player=int(state.current_player()),
            legal_actions=legal, legal_action_names=[state.action_to_string(self._agent, a) for a in legal],
            observation=seen, history=[int(a) for a in state.history()] if public else [],
            others=others if public else [], returns=returns,
            truncated=self._truncated, reward=reward, done=done,
            metadata={"opponent": self._opponent, "agent_steps": self._steps,
                      "utility_range": [float(game.min_utility()), float(game.max_utility())]},
        )
