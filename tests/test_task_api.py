"""The Task API served: upstream 0.10's HTTP routes, the /ws ``tasks`` frame and the client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from openenv.client import GenericEnvClient
from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.tasks import SeedTasks, Task
from openenv.testing import live_server
from openenv.types import Action, Observation, State


class Guess(Action):
    n: int = 0


class NumberObs(Observation):
    target_hint: int = 0


class Numbers(Environment[Guess, NumberObs, State]):
    """Guess the seed's number; every task of a split is a seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False
    tasks = SeedTasks({"train": range(0, 10_000), "test": range(100_000, 100_050)}, config={"max": 9})

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> NumberObs:
        self.target = (seed or 0) % 10
        return NumberObs(target_hint=self.target % 2)

    def step(self, action: Guess, timeout_s: float | None = None, **kwargs: Any) -> NumberObs:
        return NumberObs(done=True, reward=float(action.n == self.target))


class Plain(Environment[Guess, NumberObs, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> NumberObs:
        return NumberObs()

    def step(self, action: Guess, timeout_s: float | None = None, **kwargs: Any) -> NumberObs:
        return NumberObs(done=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with live_server(Numbers, env_name="numbers", max_sessions=8) as srv:
        yield srv


@pytest.fixture(scope="module")
def plain() -> Iterator[Any]:
    with live_server(Plain, env_name="plain", max_sessions=2) as srv:
        yield srv


def test_http_routes_answer_upstreams_shapes(server: Any) -> None:
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/list_environments").json() == ["numbers"]
        assert http.get("/NUMBERS/splits").json() == [{"name": "train", "type": "train", "num_tasks": 10_000},
                                                      {"name": "test", "type": "test", "num_tasks": 50}]
        listing = http.post("/numbers/tasks", json={"split": "test"}).json()
        assert listing["env_name"] == "numbers" and len(listing["tasks"]) == 50
        assert listing["tasks"][0] == {"id": "test-100000", "split": "test", "seed": 100_000, "data": {"max": 9}}
        assert len(http.post("/numbers/tasks", json={"split": "train"}).json()["tasks"]) == 10_000
        assert http.post("/numbers/num_tasks", json={"split": "train"}).json() == {"num_tasks": 10_000}
        assert http.post("/numbers/task", json={"split": "train", "index": 7}).json()["task"]["id"] == "train-7"
        got = http.post("/numbers/task_range", json={"split": "train", "start": 3, "stop": 5}).json()
        assert [t["id"] for t in got["tasks"]] == ["train-3", "train-4"]
        assert http.post("/numbers/task_by_id", json={"task_id": "test-100001"}).json()["task"]["seed"] == 100_001


def test_http_errors_are_structured(server: Any, plain: Any) -> None:
    with httpx.Client(base_url=server.url) as http:
        r = http.get("/other/splits")
        assert (r.status_code, r.json()) == (404, {"detail": "unknown environment 'other'"})
        r = http.post("/numbers/task", json={"split": "train", "index": 10_000})
        assert r.status_code == 400 and r.json()["detail"] == "Invalid task index"
        assert "0..9999" in r.json()["message"]
        r = http.post("/numbers/num_tasks", json={"split": "tset"})
        assert r.status_code == 400 and r.json()["did_you_mean"] == "test"
        assert "Did you mean 'test'" in r.json()["detail"]
        r = http.post("/numbers/task_by_id", json={"task_id": "test-1000001"})
        assert r.status_code == 404 and r.json()["splits"] == ["train", "test"]
        r = http.post("/numbers/tasks", json={"split": "train", "extra": 1})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "extra"]
        r = http.post("/numbers/task", content=b"{nope")
        assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"
    with httpx.Client(base_url=plain.url) as http:
        r = http.get("/plain/splits")
        assert r.status_code == 501 and r.json()["reason"] == "no_tasks"
        assert "declares no tasks" in r.json()["detail"] and "tasks.jsonl" in r.json()["detail"]
        assert http.get("/health").json() == {"status": "healthy"}  # still serving


async def test_client_lists_and_fetches(server: Any) -> None:
    async with GenericEnvClient(server.url) as env:
        assert "tasks" in await env.extensions()
        splits = await env.splits()
        assert [(s.name, s.type, s.num_tasks) for s in splits] == [("train", "train", 10_000), ("test", "test", 50)]
        tasks = await env.tasks("test")
        assert len(tasks) == 50 and tasks[3] == Task(id="test-100003", split="test", seed=100_003, data={"max": 9})
        assert [t.id for t in await env.tasks("train", 5, 7)] == ["train-5", "train-6"]
        assert await env.num_tasks("train") == 10_000
        assert (await env.task("train-42")).seed == 42
        with pytest.raises(ValidationError, match="Did you mean 'train'"):
            await env.tasks("trian")
        with pytest.raises(ValidationError, match="Unknown task id"):
            await env.task("train-10000")
        result = await env.reset(task_id="test-100007")
        assert result.observation["metadata"] == {"task_id": "test-100007", "split": "test"}
        result = await env.reset(split="train", group_id="g1")
        first = result.observation["metadata"]
        assert first["group_id"] == "g1" and first["split"] == "train"
        again = await env.reset(split="train", group_id="g1")
        assert again.observation["metadata"] == first  # the group fixes the task


def test_sync_client_twins(server: Any) -> None:
    from openenv.client import SyncEnvClient

    with SyncEnvClient(server.url, action_type=Guess, observation_type=NumberObs) as env:
        assert [s.name for s in env.splits()] == ["train", "test"]
        assert env.task("test-100000").data == {"max": 9}
        assert len(env.tasks("test", 0, 3)) == 3
        assert env.num_tasks("test") == 50


async def test_ws_frame_without_the_extension_is_unknown(server: Any) -> None:
    import websockets

    async with websockets.connect(server.ws_url) as ws:
        await ws.send(json.dumps({"type": "tasks", "data": {"query": "splits"}}))
        reply = json.loads(await ws.recv())
        assert reply["data"]["code"] == "UNKNOWN_TYPE"  # as upstream answers: opt-in only
        await ws.send(json.dumps({"type": "hello", "data": {"want": ["tasks"]}}))
        assert json.loads(await ws.recv())["data"]["extensions"] == ["tasks"]
        await ws.send(json.dumps({"type": "tasks", "data": {"query": "task"}}))
        reply = json.loads(await ws.recv())
        assert reply["data"]["code"] == "VALIDATION_ERROR" and "needs split, index" in reply["data"]["message"]
        await ws.send(json.dumps({"type": "tasks", "data": {"query": "task", "split": "test", "index": 1}}))
        assert json.loads(await ws.recv())["data"]["task"]["id"] == "test-100001"


async def test_client_against_env_without_tasks(plain: Any) -> None:
    async with GenericEnvClient(plain.url) as env:
        with pytest.raises(ValidationError, match="declares no tasks") as info:
            await env.splits()
        assert info.value.data["reason"] == "no_tasks"
        with pytest.raises(ValidationError, match="declares no tasks"):
            await env.reset(task_id="x")
        await env.reset()  # the session survives both


def test_readme_tasks_snippet_runs(server: Any, readme_block: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    namespace: dict[str, Any] = {}
    exec(readme_block("async def tasks_demo"), namespace)  # the README's block, verbatim
    asyncio.run(namespace["tasks_demo"](server.url))
    out = capsys.readouterr().out.splitlines()
    assert out == ["[('train', 'train', 10000), ('test', 'test', 50)]", "True", "True"]
