"""The chess env: move parsing, opponents, results, seeding, bad input, README.

Its run through `openenv run` is tests/test_every_env_plays.py (every installed env).
"""

from __future__ import annotations

from pathlib import Path

import chess
import pytest

from openenv.errors import ExecutionError, ValidationError
from openenv.testing import EnvContract, check_registered, readme_snippets, run_snippet
from openenv_env_chess import ChessAction, ChessEnv
from openenv_env_chess.opponents import OPPONENTS, stockfish_path
from openenv_env_chess.policy import best_move

README = Path(__file__).resolve().parents[1] / "README.md"


def play(env: ChessEnv, move: str):
    return env.step(ChessAction(move=move))


def test_uci_and_san_moves_and_fen() -> None:
    env = ChessEnv(opponent="random")
    obs = env.reset(seed=1)
    assert obs.fen == chess.STARTING_FEN and obs.agent_color == "white" and obs.turn == "white"
    assert len(obs.legal_actions) == 20 and "e2e4" in obs.legal_actions
    assert obs.metadata["opponent"] == "random"
    obs = play(env, "e2e4")
    assert obs.agent_move == "e2e4" and obs.opponent_move is not None and obs.turn == "white"
    board = chess.Board()
    board.push_uci("e2e4")
    board.push_uci(obs.opponent_move)
    assert obs.fen == board.fen()
    assert obs.legal_actions == sorted(m.uci() for m in board.legal_moves)
    obs = play(env, "Nf3")
    assert obs.agent_move == "g1f3" and obs.reward == 0.0 and not obs.done
    assert env.state.moves[0] == "e2e4" and env.state.moves[2] == "g1f3" and len(env.state.moves) == 4


def test_illegal_and_malformed_moves_are_validation_errors() -> None:
    env = ChessEnv()
    env.reset(seed=0)
    fen = env.state.fen
    with pytest.raises(ValidationError, match=r"illegal move e2e5; legal moves: .*e2e4") as info:
        play(env, "e2e5")
    assert "e2e4" in info.value.data["legal_moves"]
    with pytest.raises(ValidationError, match="illegal move Qh5"):
        play(env, "Qh5")
    with pytest.raises(ValidationError, match="unreadable move"):
        play(env, "hello")
    assert env.state.fen == fen  # nothing changed
    with pytest.raises(ValueError):
        ChessAction.model_validate({"move": ""})


def test_step_before_reset_and_after_the_end() -> None:
    with pytest.raises(ExecutionError, match="reset"):
        play(ChessEnv(), "e2e4")
    env = ChessEnv(opponent="random")
    # Fool's mate with the agent as black: after the opponent's f3 and g4 the agent mates.
    obs = env.reset(fen="rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2")
    assert obs.agent_color == "white" and obs.turn == "white"  # it is black's move: the opponent moved
    env = ChessEnv(opponent="random", color="black")
    obs = env.reset(fen="rnbqkbnr/pppp1ppp/8/4p3/6P1/5P2/PPPPP2P/RNBQKBNR b KQkq - 0 2")
    assert obs.agent_color == "black" and obs.opponent_move is None
    obs = play(env, "Qh4#")
    assert obs.done and obs.reward == 1.0 and obs.result == "0-1" and obs.termination == "checkmate"
    assert obs.legal_actions == [] and obs.opponent_move is None
    with pytest.raises(ExecutionError, match="reset"):
        play(env, "e7e5")


def test_agent_loses_gets_minus_one() -> None:
    env = ChessEnv(opponent="greedy")
    obs = env.reset(seed=0, fen="8/8/8/8/8/6k1/q7/7K w - - 0 1")  # Kg1 is forced, then the queen mates
    assert obs.legal_actions == ["h1g1"]
    obs = play(env, "Kg1")
    assert obs.opponent_move in ("a2g2", "a2b1", "a2a1")  # each mates; the seed breaks the tie
    assert obs.done and obs.reward == -1.0 and obs.result == "0-1" and obs.termination == "checkmate"


def test_max_moves_truncates_with_reward_zero() -> None:
    env = ChessEnv(opponent="random", max_moves=3)
    obs = env.reset(seed=5)
    for _ in range(3):
        assert not obs.done
        obs = play(env, obs.legal_actions[0])
    assert obs.done and obs.truncated and obs.reward == 0.0 and obs.termination == "move_limit"


@pytest.mark.parametrize("opponent", ["random", "greedy"])
def test_baseline_beats_the_weak_opponents(opponent: str) -> None:
    env = ChessEnv()
    obs = env.reset(seed=3, opponent=opponent)
    while not obs.done:
        obs = play(env, best_move(obs))
    assert obs.reward == 1.0 and obs.termination == "checkmate"


def test_alphabeta_opponent_takes_a_hanging_queen() -> None:
    env = ChessEnv(opponent="alphabeta", depth=2)
    obs = env.reset(fen="4k3/8/8/3q4/8/8/8/3RK3 w - - 0 1")
    obs = play(env, "Kf2")  # leaves the rook on d1 to the queen
    assert obs.opponent_move == "d5d1" and obs.metadata["opponent"] == "alphabeta(depth=2)"


def test_same_seed_same_game_and_the_seed_matters() -> None:
    def game(seed: int) -> list[str]:
        env = ChessEnv(opponent="random", max_moves=12)
        obs = env.reset(seed=seed, color="random")
        while not obs.done:
            obs = play(env, obs.legal_actions[len(obs.legal_actions) // 2])
        return env.state.moves

    assert game(4) == game(4)
    assert len({tuple(game(s)) for s in range(5)}) > 1


def test_bad_reset_options() -> None:
    env = ChessEnv()
    with pytest.raises(ValidationError, match="Did you mean 'greedy'"):
        env.reset(opponent="greedyy")
    with pytest.raises(ValidationError, match="color"):
        env.reset(color="purple")
    with pytest.raises(ValidationError, match="fen"):
        env.reset(fen="not a fen")
    with pytest.raises(ValidationError, match="unknown reset option"):
        env.reset(colour="white")
    assert "stockfish" in OPPONENTS


@pytest.mark.parametrize(("options", "message"), [
    ({"fen": 123}, r"fen must be a FEN string \(e\.g\. 'rnbqkbnr/.*'\), got 123"),
    ({"fen": None}, "fen must be a FEN string"),
    ({"max_moves": "x"}, r"max_moves must be a whole number of at least 1 \(e\.g\. max_moves=2\), got 'x'"),
    ({"max_moves": 0}, "max_moves must be a whole number of at least 1"),
    ({"max_moves": True}, "max_moves must be a whole number"),
    ({"depth": "deep"}, "depth must be a whole number of at least 1"),
    ({"depth": 2.5}, "depth must be a whole number"),
])
def test_wrongly_typed_reset_options_are_validation_errors_naming_the_fix(options: dict, message: str) -> None:
    env = ChessEnv()
    with pytest.raises(ValidationError, match=message):
        env.reset(**options)
    assert env.reset(seed=1, max_moves=5, depth=1).done is False  # the env still plays


def test_stockfish_is_used_only_when_installed() -> None:
    env = ChessEnv()
    if stockfish_path() is None:
        with pytest.raises(ValidationError, match="stockfish binary on PATH"):
            env.reset(opponent="stockfish")
        obs = env.reset(opponent="auto")
        assert obs.metadata["opponent"].startswith("alphabeta")
    else:
        obs = env.reset(opponent="stockfish", depth=1)
        obs = play(env, "e2e4")
        assert obs.metadata["opponent"].startswith("stockfish") and obs.opponent_move
        env.close()


def test_readme_example_runs() -> None:
    block = readme_snippets(README)[0]
    done = run_snippet(block, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1-0 checkmate 1.0"


@pytest.mark.requires_plugins("provider-local", "transport-ws")
async def test_bad_input_over_the_wire_keeps_the_server_serving(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv import GenericEnvClient

    monkeypatch.setenv("OPENENV_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    client = await GenericEnvClient.from_provider("chess", provider="local")
    try:
        assert client.base_url.startswith(("http://127.0.0.1:", "ws://127.0.0.1:"))
        await client.reset(seed=1, opponent="random")
        with pytest.raises(ValidationError, match="illegal move e2e5; legal moves:") as info:
            await client.step({"move": "e2e5"})
        assert "e2e4" in info.value.data["legal_moves"]
        with pytest.raises(ValidationError, match="Did you mean 'greedy'"):
            await client.reset(opponent="greedyy")
        await client.reset(fen="8/8/8/8/8/6k1/q7/7K w - - 0 1")
        result = await client.step({"move": "Kg1"})
        assert result.done and result.reward == -1.0
        with pytest.raises(ExecutionError, match="call reset"):
            await client.step({"move": "h1g1"})
        result = await client.reset(seed=2)
        assert not result.done and len(result.observation["legal_actions"]) == 20
    finally:
        await client.close()


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(ChessEnv).run()  # run() raises on a broken check


async def test_contract_plugin_manifest_and_independent_sessions() -> None:
    from openenv.sessions import SessionManager
    from openenv_env_chess import ChessEnv, plugin

    entry, manifest = check_registered(plugin, "chess", "openenv_env_chess.env:ChessEnv")
    assert entry.load() is ChessEnv and entry.description
    assert manifest.description and manifest.tags
    assert manifest.reward_range is not None and len(manifest.reward_range) == 2 and "resources" in manifest.model_extra
    manager = SessionManager(ChessEnv, env_name="chess", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1, "opponent": "random"})
        await manager.reset(b, {"seed": 1, "opponent": "random"})
        await manager.step(a, {"move": "e2e4"})
        state_a, state_b = await manager.state(a), await manager.state(b)
        assert state_a["step_count"] == 1 and state_b["step_count"] == 0
        assert state_a["fen"] != state_b["fen"]
    finally:
        await manager.shutdown()
