"""The OpenSpiel env: games by name, opponents, chance, rewards, seeding, bad input, README, a served run."""

from __future__ import annotations

from pathlib import Path

import pyspiel
import pytest

from openenv.errors import ExecutionError, ValidationError
from openenv.testing import EnvContract, check_registered, readme_snippets, run_snippet
from openenv_env_openspiel import OpenSpielAction, OpenSpielEnv
from openenv_env_openspiel.policy import minimax_action

README = Path(__file__).resolve().parents[1] / "README.md"


def act(env: OpenSpielEnv, action: int | str):
    return env.step(OpenSpielAction(action=action))


def test_tic_tac_toe_by_id_and_name() -> None:
    env = OpenSpielEnv(opponent="first")
    obs = env.reset(seed=0)
    assert obs.game == "tic_tac_toe()" and obs.agent_player == 0 and obs.current_player == 0
    assert obs.legal_actions == list(range(9)) and obs.legal_action_names[4] == "x(1,1)"
    obs = act(env, "x(1,1)")
    assert obs.history == [4, 0] and obs.others == [{"player": 1, "action": 0, "name": "o(0,0)"}]
    obs = act(env, 8)
    assert obs.history == [4, 0, 8, 1] and 4 not in obs.legal_actions and obs.reward == 0.0


def test_minimax_never_loses_and_wins_against_weak_opponents() -> None:
    env = OpenSpielEnv()
    totals = []
    for seed in range(8):
        obs = env.reset(seed=seed, opponent="random")
        total = 0.0
        while not obs.done:
            obs = act(env, minimax_action(obs))
            total += obs.reward
        assert total == obs.returns[0] and total >= 0.0
        totals.append(total)
    assert max(totals) == 1.0
    obs = env.reset(opponent="first")
    while not obs.done:
        obs = act(env, minimax_action(obs))
    assert obs.reward == 1.0 and obs.returns == [1.0, -1.0]


def test_the_agent_can_play_second_and_lose() -> None:
    env = OpenSpielEnv(opponent="first")
    obs = env.reset(agent_player=1)
    assert obs.history == [0] and obs.current_player == 1  # "first" opened in the corner
    # o plays badly along the bottom row; x (first legal each time) completes the top row.
    rewards = []
    for name in ["o(2,0)", "o(2,1)"]:
        obs = act(env, name)
        rewards.append(obs.reward)
    assert obs.done and rewards == [0.0, -1.0] and obs.returns == [1.0, -1.0]


def test_kuhn_poker_chance_is_seeded_and_hides_the_other_card() -> None:
    env = OpenSpielEnv()
    obs = env.reset(seed=5, game="kuhn_poker")
    assert obs.legal_action_names == ["Pass", "Bet"]
    assert obs.history == [] and obs.others == []  # the deal is hidden: it holds the other card
    deal = env.state.history  # the full history is in the state, not the observation
    assert len(deal) == 2 and obs.observation == pyspiel.load_game("kuhn_poker").new_initial_state().child(
        deal[0]).child(deal[1]).observation_string(0)
    deals = {tuple(env.reset(seed=s, game="kuhn_poker") and env.state.history[:2]) for s in range(30)}
    assert len(deals) == 6  # every deal of 3 cards to 2 players
    obs = env.reset(seed=5, game="kuhn_poker")
    total = 0.0
    while not obs.done:
        obs = act(env, "Bet" if "Bet" in obs.legal_action_names else "Call" if "Call" in
                  obs.legal_action_names else obs.legal_actions[0])
        total += obs.reward
    assert total == obs.returns[0] and obs.returns[0] + obs.returns[1] == 0.0 and total != 0.0
    assert obs.history[:2] == deal  # revealed once over


def test_simultaneous_games_are_played_turn_based_without_leaking_the_other_choice() -> None:
    env = OpenSpielEnv(opponent="first")
    obs = env.reset(seed=1, game="matrix_rps", agent_player=1)
    assert obs.game.startswith("turn_based_simultaneous_game") and obs.legal_action_names == ["Rock", "Paper",
                                                                                              "Scissors"]
    assert obs.others == [] and obs.history == []  # player 0 chose already, unseen
    obs = act(env, "Paper")
    assert obs.done and obs.reward == 1.0 and obs.history == [0, 1]


def test_params_and_game_strings() -> None:
    env = OpenSpielEnv()
    assert len(env.reset(game="kuhn_poker", params={"players": 3}).returns) == 3
    assert len(env.reset(game="kuhn_poker(players=4)").returns) == 4
    with pytest.raises(ValidationError, match="cannot load game"):
        env.reset(game="kuhn_poker", params={"players": "many"})


@pytest.mark.skipif("blackjack" not in pyspiel.registered_names(), reason="blackjack not registered")
def test_blackjack_single_player_against_the_dealer() -> None:
    env = OpenSpielEnv()
    results = set()
    for seed in range(12):
        obs = env.reset(seed=seed, game="blackjack")
        assert obs.legal_action_names == ["Hit", "Stand"] and obs.metadata["utility_range"] == [-1.0, 1.0]
        total = 0.0
        while not obs.done:
            obs = act(env, "Stand")
            total += obs.reward
        assert total == obs.returns[0]
        results.add(total)
    assert results >= {1.0, -1.0}


def test_same_seed_same_episode() -> None:
    def episode(seed: int) -> list[int]:
        env = OpenSpielEnv()
        obs = env.reset(seed=seed, game="kuhn_poker")
        while not obs.done:
            obs = act(env, obs.legal_actions[0])
        return obs.history

    assert episode(3) == episode(3)
    assert len({tuple(episode(s)) for s in range(10)}) > 1


def test_bad_input_is_a_structured_error() -> None:
    env = OpenSpielEnv()
    with pytest.raises(ValidationError, match="Did you mean 'tic_tac_toe'"):
        env.reset(game="tic_tac_to")
    with pytest.raises(ValidationError, match="unknown opponent"):
        env.reset(opponent="smart")
    with pytest.raises(ValidationError, match="agent_player"):
        env.reset(agent_player=2)
    with pytest.raises(ExecutionError, match="reset"):
        act(env, 0)
    env.reset(opponent="first")
    act(env, 4)
    with pytest.raises(ValidationError, match=r"illegal action 4\. Legal actions: 1 \(x\(0,1\)\)") as info:
        act(env, 4)
    assert info.value.data["legal_actions"] == [1, 2, 3, 5, 6, 7, 8]
    with pytest.raises(ValidationError, match="Did you mean 'x"):
        act(env, "x(1,2")
    while not env.state.done:
        act(env, next(a for a in range(9) if a not in env.state.history))
    with pytest.raises(ExecutionError, match="reset"):
        act(env, 0)


def test_max_steps_truncates() -> None:
    env = OpenSpielEnv(max_steps=2)
    obs = env.reset(seed=1)
    obs = act(env, obs.legal_actions[0])
    obs = act(env, obs.legal_actions[0])
    assert obs.done and obs.truncated and obs.legal_actions == []


def test_readme_example_runs() -> None:
    block = readme_snippets(README)[0]
    done = run_snippet(block, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "'Pass', 'Bet'" in done.stdout.strip().splitlines()[-1]


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(OpenSpielEnv).run()  # run() raises on a broken check


async def test_contract_plugin_manifest_and_independent_sessions() -> None:
    from openenv.sessions import SessionManager
    from openenv_env_openspiel import OpenSpielEnv, plugin

    entry, manifest = check_registered(plugin, "openspiel", "openenv_env_openspiel.env:OpenSpielEnv")
    assert entry.load() is OpenSpielEnv and entry.description
    assert manifest.description and manifest.tags
    assert manifest.reward_range is not None and len(manifest.reward_range) == 2 and "resources" in manifest.model_extra
    manager = SessionManager(OpenSpielEnv, env_name="openspiel", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1})
        await manager.reset(b, {"seed": 1})
        await manager.step(a, {"action": 4})
        state_a, state_b = await manager.state(a), await manager.state(b)
        assert state_a["step_count"] == 1 and state_b["step_count"] == 0
        assert state_a["history"] != state_b["history"]
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("max_steps", ["x", 0, -3, 2.5, True, None])
def test_wrongly_typed_max_steps_is_a_validation_error_naming_the_fix(max_steps: object) -> None:
    env = OpenSpielEnv()
    with pytest.raises(ValidationError, match=r"max_steps must be a whole number of at least 1 \(e\.g\. "
                                              rf"max_steps=100\), got {max_steps!r}"):
        env.reset(max_steps=max_steps)
    assert env.reset(seed=0, max_steps=3).done is False
