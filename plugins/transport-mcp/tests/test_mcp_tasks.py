"""The Task API through MCP: task resources over ``POST /mcp`` (both dialects), the ``/ws`` tunnel
and Streamable HTTP, their errors, and ``MCPToolClient.splits/tasks/num_tasks/task`` (docs/protocol.md
§13)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp_support import CalcEnv, make_app, post, rpc, running, ws_plugin

from openenv.errors import ValidationError
from openenv.tasks import InlineTasks, SeedTasks, Split, Task
from openenv_transport_mcp.client import MCPToolClient, SyncMCPToolClient
from openenv_transport_mcp.resources import RESOURCE_NOT_FOUND, split_uri, task_uri

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}


class TaskCalc(CalcEnv):
    """A tool env with procedural tasks: 10,000 training seeds and 5 test seeds (from 50,000)."""

    tasks = SeedTasks({"train": range(0, 10_000), "test": range(50_000, 50_005)}, config={"level": 2})
    built = 0

    def __init__(self) -> None:
        TaskCalc.built += 1
        super().__init__()


class OddIds(CalcEnv):
    """Task ids with characters a URI must percent-encode."""

    tasks = InlineTasks([{"id": "a/b c?", "split": "dev", "prompt": "x"}], split_types={"dev": "validation"})


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, httpx.Client]]:
    with running(make_app(TaskCalc)) as base, httpx.Client(timeout=10) as client:
        yield base, client


def _read(client: httpx.Client, base: str, uri: str, **headers: str) -> Any:
    body = post(client, base, rpc("resources/read", {"uri": uri}), headers=headers).json()
    assert "result" in body, body
    (content,) = body["result"]["contents"]
    assert content["uri"] == uri and content["mimeType"] == "application/json"
    return json.loads(content["text"])


def _error(client: httpx.Client, base: str, uri: Any) -> dict[str, Any]:
    body = post(client, base, rpc("resources/read", {"uri": uri})).json()
    assert "error" in body, body
    return body["error"]  # type: ignore[no-any-return]


def test_resources_list_the_splits_and_read_every_form(served: Any) -> None:
    base, client = served
    built = TaskCalc.built
    listed = post(client, base, rpc("resources/list")).json()["result"]["resources"]
    assert [r["uri"] for r in listed] == ["openenv://tasks", "openenv://tasks/train", "openenv://tasks/test"]
    assert "10000 tasks" in listed[1]["description"]
    templates = post(client, base, rpc("resources/templates/list")).json()["result"]["resourceTemplates"]
    assert {t["uriTemplate"] for t in templates} == {"openenv://tasks/{split}", "openenv://tasks/{split}/{index}",
                                                      "openenv://task/{task_id}"}

    splits = _read(client, base, "openenv://tasks")
    assert splits == {"env_name": "TaskCalc", "splits": [{"name": "train", "type": "train", "num_tasks": 10_000},
                                                         {"name": "test", "type": "test", "num_tasks": 5}]}
    listing = _read(client, base, "openenv://tasks/train")
    assert listing["split"] == "train" and listing["num_tasks"] == 10_000 and len(listing["tasks"]) == 10_000
    assert listing["tasks"][9_999] == {"id": "train-9999", "split": "train", "seed": 9_999, "data": {"level": 2}}
    page = _read(client, base, "openenv://tasks/train?start=3&stop=5")
    assert [t["id"] for t in page["tasks"]] == ["train-3", "train-4"] and page["num_tasks"] == 10_000
    assert _read(client, base, "openenv://tasks/test/4")["task"]["seed"] == 50_004
    assert _read(client, base, "openenv://task/test-50001")["task"] == {
        "id": "test-50001", "split": "test", "seed": 50_001, "data": {"level": 2}}
    assert TaskCalc.built == built  # no resource builds an env


def test_the_same_answers_as_the_http_task_api(served: Any) -> None:
    base, client = served
    via_http = client.post(base + "/TaskCalc/task_range", json={"split": "train", "start": 10, "stop": 20}).json()
    assert _read(client, base, "openenv://tasks/train?start=10&stop=20")["tasks"] == via_http["tasks"]
    assert _read(client, base, "openenv://tasks")["splits"] == client.get(base + "/TaskCalc/splits").json()


def test_errors_are_structured_with_did_you_mean(served: Any) -> None:
    base, client = served
    err = _error(client, base, "openenv://tasks/tset")
    assert err["code"] == RESOURCE_NOT_FOUND and "Did you mean 'test'?" in err["message"]
    assert err["data"]["code"] == "VALIDATION_ERROR" and err["data"]["did_you_mean"] == "test"
    assert err["data"]["splits"] == ["train", "test"] and err["data"]["uri"] == "openenv://tasks/tset"
    err = _error(client, base, "openenv://task/test-5OOO1")
    assert err["code"] == RESOURCE_NOT_FOUND and err["data"]["task_id"] == "test-5OOO1"
    err = _error(client, base, "openenv://taks/train")
    assert err["code"] == RESOURCE_NOT_FOUND and "Did you mean 'tasks'?" in err["message"]
    assert "openenv://task/{task_id}" in err["data"]["forms"]
    assert _error(client, base, "file:///etc/passwd")["code"] == RESOURCE_NOT_FOUND
    err = _error(client, base, "openenv://tasks/test/9")
    assert err["code"] == -32602 and err["data"]["num_tasks"] == 5 and "Invalid task index 9" in err["message"]
    assert _error(client, base, "openenv://tasks/test/-1")["code"] == -32602
    err = _error(client, base, "openenv://tasks/train?begin=3")
    assert err["code"] == -32602 and "unknown query parameter 'begin'" in err["message"]
    assert _error(client, base, "openenv://tasks/train?start=x")["code"] == -32602
    err = _error(client, base, None)
    assert err["code"] == -32602 and "'uri' is required" in err["message"]
    assert post(client, base, rpc("resources/subscribe", {"uri": "openenv://tasks"})).json()["error"][
        "code"] == -32601
    assert _read(client, base, "openenv://tasks/test")["num_tasks"] == 5  # the server kept serving


def test_an_env_without_tasks_says_so() -> None:
    with running(make_app(CalcEnv)) as base, httpx.Client(timeout=10) as client:
        assert post(client, base, rpc("resources/list")).json()["result"] == {"resources": []}
        err = _error(client, base, "openenv://tasks")
        assert err["code"] == RESOURCE_NOT_FOUND and err["data"]["reason"] == "no_tasks"
        assert "declares no tasks" in err["message"] and "SeedTasks" in err["message"]
        init = post(client, base, rpc("initialize", INIT)).json()["result"]
        assert "resources" not in init["capabilities"]


def test_mcp_sessions_advertise_and_read_resources(served: Any) -> None:
    base, client = served
    response = post(client, base, rpc("initialize", INIT))
    assert response.json()["result"]["capabilities"]["resources"] == {"subscribe": False, "listChanged": False}
    headers = {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    assert _read(client, base, "openenv://tasks/test/0", **headers)["task"]["id"] == "test-50000"
    client.delete(base + "/mcp", headers=headers)


def test_ids_are_percent_encoded_in_uris() -> None:
    assert task_uri("a/b c?") == "openenv://task/a%2Fb%20c%3F" and split_uri("dev") == "openenv://tasks/dev"
    with running(make_app(OddIds)) as base, httpx.Client(timeout=10) as client:
        assert _read(client, base, task_uri("a/b c?"))["task"]["data"] == {"prompt": "x"}


needs_ws = pytest.mark.skipif(ws_plugin is None, reason="openenvkit-transport-ws is not installed")


def _client(base: str) -> MCPToolClient:
    from openenv_transport_ws.client import WebSocketConnector

    return MCPToolClient(base, connector=WebSocketConnector())


def _without_post_mcp(app: Any) -> Any:
    """An ASGI wrapper hiding ``/mcp``, like a server without the MCP transport."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/mcp":
            scope = {**scope, "path": "/no-mcp-here"}
        await app(scope, receive, send)

    return asgi


@needs_ws
async def test_resources_through_the_ws_tunnel(served: Any) -> None:
    from websockets.asyncio.client import connect

    base, _ = served
    async with connect(base.replace("http://", "ws://") + "/ws") as ws:
        await ws.send(json.dumps({"type": "mcp", "data": rpc("resources/read", {"uri": "openenv://tasks/test/2"})}))
        reply = json.loads(await ws.recv())
        assert json.loads(reply["data"]["result"]["contents"][0]["text"])["task"]["id"] == "test-50002"
        await ws.send(json.dumps({"type": "mcp", "data": rpc("resources/read", {"uri": "openenv://task/nope"}, 2)}))
        reply = json.loads(await ws.recv())
        assert reply["data"]["error"]["code"] == RESOURCE_NOT_FOUND


@needs_ws
async def test_client_reads_tasks_without_a_session() -> None:
    app = make_app(TaskCalc)
    ctx = app.state.ctx
    with running(app) as base:
        env = _client(base)
        try:
            assert await env.splits() == [Split(name="train", type="train", num_tasks=10_000),
                                          Split(name="test", type="test", num_tasks=5)]
            assert await env.num_tasks("train") == 10_000
            assert len(await env.tasks("train")) == 10_000
            assert [t.id for t in await env.tasks("train", 2, 4)] == ["train-2", "train-3"]
            assert await env.task("test-50003") == Task(id="test-50003", split="test", seed=50_003, data={"level": 2})
            with pytest.raises(ValidationError) as info:
                await env.task("test-5OOO3")
            assert info.value.data["task_id"] == "test-5OOO3" and "splits" in info.value.data
            with pytest.raises(ValidationError) as info:
                await env.tasks("tset")
            assert info.value.data["did_you_mean"] == "test"
            assert env.tool_path is None and ctx.sessions.active == 0  # reading tasks opened no session
        finally:
            await env.close()


@needs_ws
def test_sync_client_and_an_env_without_tasks() -> None:
    with running(make_app(CalcEnv)) as base, SyncMCPToolClient(_client(base)) as env:
        with pytest.raises(ValidationError) as info:
            env.splits()
        assert info.value.data["reason"] == "no_tasks" and "declares no tasks" in info.value.message
    with running(make_app(TaskCalc)) as base, SyncMCPToolClient(_client(base)) as env:
        assert [t.seed for t in env.tasks("test")] == [50_000, 50_001, 50_002, 50_003, 50_004]
        assert env.task("train-7").seed == 7


@needs_ws
async def test_client_falls_back_to_the_ws_tasks_frame() -> None:
    app = make_app(TaskCalc)
    with running(_without_post_mcp(app)) as base:
        async with _client(base) as env:
            assert env.tool_path == "step"
            assert [s.name for s in await env.splits()] == ["train", "test"]
            assert (await env.task("train-9")).seed == 9
            assert await env.num_tasks("test") == 5
