"""How the session manager applies a server rubric: kinds of rubric, declarations, faults."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from openenv.errors import RubricFailure, RuleViolation
from openenv.rubric import AsyncRubric, Rubric, RubricResult
from openenv.sessions import SessionManager
from openenv.sessions.scoring import declared_rubric
from openenv.types import observation_payload
from openenv_env_echo.env import EchoEnv
from openenv_env_grid_world.env import GridWorldEnv
from openenv_rubrics.compose import WeightedSum
from openenv_rubrics.trajectory import DiscountedReturn


async def _play(rubric: Rubric | None, messages: list[str], env: Any = EchoEnv) -> list[dict[str, Any]]:
    manager = SessionManager(env, rubric=rubric)
    session = await manager.open()
    try:
        # As a transport answers a client that asked for the components (§2.7).
        out = [(await manager.reset_outcome(session)).payload(components=True)]
        for m in messages:
            out.append((await manager.step_outcome(session, {"message": m})).payload(components=True))
        return out
    finally:
        await manager.shutdown()


class _Len(Rubric):
    high = 100.0

    def evaluate(self, action: Any, observation: Any) -> float:
        return float(len(action.message))


def test_components_go_only_to_a_caller_that_asked() -> None:
    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        manager = SessionManager(EchoEnv, rubric=EchoEnv.rubric)
        session = await manager.open()
        await manager.reset(session)
        outcome = await manager.step_outcome(session, {"message": "abc"})
        asked = outcome.payload(components=True)
        plain = outcome.payload(components=False)
        await manager.shutdown()
        return asked, plain

    asked, plain = asyncio.run(run())
    assert asked["reward_components"] == {"length": pytest.approx(0.3)}
    assert "reward_components" not in plain and plain["reward"] == asked["reward"]


def test_no_rubric_leaves_the_envelope_as_it_was() -> None:
    class Bare(EchoEnv):
        rubric = None

    replies = asyncio.run(_play(None, ["abc"], Bare))
    assert replies[1]["reward"] == pytest.approx(0.3) and "reward_components" not in replies[1]


def test_composite_components_travel_with_dotted_names() -> None:
    rubric = WeightedSum([_Len(name="len"), _Len(name="again")], weights=[0.5, 0.25], name="total")
    reply = asyncio.run(_play(rubric, ["abcd"]))[1]
    assert reply["reward"] == 3.0
    assert reply["reward_components"] == {"total": 3.0, "total.len": 4.0, "total.again": 4.0}


class _Done(EchoEnv):
    """Echo whose episode ends on the message 'end'."""

    rubric = None

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        obs = super().step(action)
        obs.done = action.message == "end"
        return obs


def test_an_episode_rubric_scores_at_done() -> None:
    rubric = DiscountedReturn(gamma=0.5)  # over each step's stored (env) reward
    replies = asyncio.run(_play(rubric, ["ab", "abcd", "end"], _Done))
    assert [r["reward"] for r in replies[1:3]] == [0.0, 0.0] and replies[1]["reward_components"] == {}
    # 0.2 + 0.5·0.4 + 0.25·0.3
    assert replies[3]["done"] and replies[3]["reward"] == pytest.approx(0.2 + 0.2 + 0.075)
    assert replies[3]["reward_components"]["discounted_return"] == pytest.approx(0.475)


class _Heavy(Rubric):
    heavy = True

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def evaluate(self, action: Any, observation: Any) -> float:
        self.threads.append(threading.current_thread().name)
        return 1.0


def test_a_heavy_rubric_runs_off_the_event_loop() -> None:
    rubric = _Heavy()
    reply = asyncio.run(_play(rubric, ["x"]))[1]
    assert reply["reward"] == 1.0 and rubric.threads and rubric.threads[0] != threading.main_thread().name


class _Slow(AsyncRubric):
    async def aevaluate(self, action: Any, observation: Any) -> RubricResult:
        await asyncio.sleep(5)
        return RubricResult(1.0)


def test_an_async_rubric_past_the_server_timeout_is_a_rubric_error() -> None:
    async def run() -> None:
        manager = SessionManager(EchoEnv, rubric=_Slow(name="slow"), step_timeout_s=0.05)
        session = await manager.open()
        await manager.reset(session)
        with pytest.raises(RubricFailure, match="timed out") as raised:
            await manager.step(session, {"message": "x"})
        assert raised.value.rubric == "slow"
        await manager.reset(session)  # the session survives
        await manager.shutdown()

    asyncio.run(run())


def test_declarations_on_the_env_class() -> None:
    assert declared_rubric(EchoEnv) is EchoEnv.rubric and declared_rubric(GridWorldEnv).name == "goal"

    class Factory(EchoEnv):
        @staticmethod
        def rubric() -> Rubric:  # type: ignore[override]
            return _Len(name="made")

    made = declared_rubric(Factory)
    assert made is not None and made.name == "made"

    class NotAFactory(EchoEnv):
        def rubric(self, extra: int) -> Rubric:  # type: ignore[override]
            raise AssertionError

    with pytest.raises(RuleViolation, match="staticmethod or @classmethod"):
        declared_rubric(NotAFactory)


def test_grid_world_served_rewards_are_its_own() -> None:
    async def run() -> list[float]:
        manager = SessionManager(GridWorldEnv)
        session = await manager.open()
        await manager.reset(session)
        rewards = []
        for move in ("right", "right", "down", "down", "right", "right"):
            obs = await manager.step(session, {"move": move})
            rewards.append(observation_payload(obs)["reward"])
            local = obs.reward
            assert local == rewards[-1]
            if obs.done:
                break
        await manager.shutdown()
        return rewards

    rewards = asyncio.run(run())
    assert all(r in (-0.01, 1.0) for r in rewards)


def test_manifest_rubric_is_applied_by_serve(tmp_path: Path, cli_env: dict[str, str], wait_until: Any) -> None:
    import subprocess
    import sys

    from openenv.client import EnvClient

    folder = tmp_path / "my_env"
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "__init__.py").write_text("")
    (folder / "server" / "app.py").write_text("from openenv.server import create_app\n"
                                             "from openenv_env_echo.env import EchoEnv\napp = create_app(EchoEnv)\n")
    (folder / "openenv.yaml").write_text(
        "name: my_env\napp: server.app:app\n"
        'rubric: \'exact_match={"expected": "yes", "response": "action.message"}\'\n')
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", str(folder), "--port", "0",
                             "--ready-file", str(ready), "--log-level", "warning"], env=cli_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, "server did not get ready"
        with EnvClient(f"http://127.0.0.1:{info['port']}").sync() as env:
            env.reset()
            r = env.step({"message": "yes"})
        assert (r.reward, r.reward_components) == (1.0, {"exact_match": 1.0})
    finally:
        proc.kill()
        proc.wait()

