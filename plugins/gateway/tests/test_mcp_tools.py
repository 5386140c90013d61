"""``/v1/openenv/mcp``: an episode's tools through the official ``mcp`` client SDK, in both protocol
eras (the initialize handshake and the per-request envelope); the key decides the episode."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.mcptools import MCP_PATH

mcp = pytest.importorskip("mcp")
httpx2 = pytest.importorskip("httpx2")

ADD = {"name": "add", "description": "Add two integers",
       "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}


class Tools:
    """A tool handler as CaptureGateway.open_episode(tools=...) takes it (the kernel bridge's shapes)."""

    def __init__(self, offset: int = 0) -> None:
        self.offset, self.calls = offset, list[dict[str, Any]]()
        self.release, self.entered = threading.Event(), threading.Event()
        self.release.set()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        method, params = request["method"], request.get("params") or {}
        if method == "tools/list":
            return {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [ADD]}}
        self.calls.append(params)
        self.entered.set()
        self.release.wait(10)
        if params["name"] != "add":
            return {"jsonrpc": "2.0", "id": request["id"],
                    "error": {"code": -32601, "message": f"unknown tool {params['name']!r}; this session's tools: add"}}
        args = params["arguments"]
        return {"jsonrpc": "2.0", "id": request["id"], "result": {
            "data": args["a"] + args["b"] + self.offset, "done": False, "metadata": {"reward": 1.0}, "error": None}}


def _client(gateway: CaptureGateway, key: str, mode: str = "auto") -> Any:
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
    return mcp.Client(streamable_http_client(gateway.base_url + MCP_PATH, http_client=http), mode=mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_mcp_sdk_lists_and_calls_an_episodes_tools(gateway: CaptureGateway, mode: str) -> None:
    mine, theirs = Tools(), Tools(offset=100)
    key, other = gateway.open_episode("a", tools=mine), gateway.open_episode("b", tools=theirs)

    async def play() -> tuple[Any, Any, Any]:
        async with _client(gateway, key, mode) as client:
            listed = await client.list_tools()
            added = await client.call_tool("add", {"a": 2, "b": 3})
            unknown = await client.call_tool("nope", {})
            return listed, added, unknown

    listed, added, unknown = asyncio.run(play())
    assert [(t.name, t.input_schema["required"]) for t in listed.tools] == [("add", ["a", "b"])]
    assert not added.is_error and added.content[0].text == "5"
    assert added.structured_content == {"data": 5, "done": False, "metadata": {"reward": 1.0}}
    assert unknown.is_error and "unknown tool 'nope'" in unknown.content[0].text
    assert [c["name"] for c in mine.calls] == ["add", "nope"] and theirs.calls == []
    gateway.close_episode(key)
    gateway.close_episode(other)


def test_a_key_of_no_live_episode_is_refused_before_the_sdk(gateway: CaptureGateway) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    forged = httpx.post(gateway.base_url + MCP_PATH, json=init, timeout=10,
                        headers={**headers, "Authorization": "Bearer oek-forged"})
    assert forged.status_code == 401 and forged.json()["error"]["code"] == "invalid_api_key"
    key = gateway.open_episode("c", tools=Tools())
    ok = httpx.post(gateway.base_url + MCP_PATH, json=init, timeout=10,
                    headers={**headers, "Authorization": f"Bearer {key}"})
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "openenv-episode-tools"
    # the SDK's DNS-rebinding check: a foreign Host header is refused
    rebound = httpx.post(gateway.base_url + MCP_PATH, json=init, timeout=10,
                         headers={**headers, "Authorization": f"Bearer {key}", "Host": "evil.example:80"})
    assert rebound.status_code in (400, 403, 421)
    gateway.close_episode(key)


def test_one_call_at_a_time_and_an_episode_without_tools(gateway: CaptureGateway) -> None:
    tools = Tools()
    tools.release.clear()
    key, plain = gateway.open_episode("d", tools=tools), gateway.open_episode("e")

    async def play() -> tuple[Any, Any]:
        async with _client(gateway, key, "legacy") as first, _client(gateway, key, "legacy") as second:
            slow = asyncio.create_task(first.call_tool("add", {"a": 1, "b": 1}))
            while not tools.entered.is_set():  # bounded by the 10 s wait inside the handler
                await asyncio.sleep(0.01)
            busy = await second.call_tool("add", {"a": 1, "b": 2})
            tools.release.set()
            return await slow, busy

    done, busy = asyncio.run(asyncio.wait_for(play(), 30))
    assert done.content[0].text == "2" and busy.is_error and "in flight" in busy.content[0].text
    assert len(tools.calls) == 1

    async def no_tools() -> tuple[Any, Any]:
        async with _client(gateway, plain, "legacy") as client:
            return await client.list_tools(), await client.call_tool("add", {"a": 1, "b": 2})

    listed, refused = asyncio.run(asyncio.wait_for(no_tools(), 30))
    assert listed.tools == [] and refused.is_error and "no tools" in refused.content[0].text
    gateway.close_episode(key)
    gateway.close_episode(plain)


def test_openenv_tool_usage_errors_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from openenv_gateway.toolcli import _arguments, main

    monkeypatch.delenv("OPENENV_TOOLS_URL", raising=False)
    assert main(["list"]) == 2 and "runs inside a harness episode" in capsys.readouterr().err
    assert main([]) == 2 and "usage: openenv-tool" in capsys.readouterr().out
    (tmp_path / "s.py").write_text("x = 1\n")
    assert _arguments(["code=@" + str(tmp_path / "s.py"), "n=3", "flag=true", "name=abc"]) == {
        "code": "x = 1\n", "n": 3, "flag": True, "name": "abc"}
    assert _arguments(['{"a": [1, 2]}']) == {"a": [1, 2]}
    monkeypatch.setenv("OPENENV_TOOLS_URL", "http://127.0.0.1:9/v1/openenv/tools")
    for bad, message in ((["call", "t", "nokey"], "is not key=value"), (["call", "t", "{oops"], "not a JSON object"),
                         (["call", "t", "code=@" + str(tmp_path / "missing")], "No such file")):
        assert main(bad) == 2 and message in capsys.readouterr().err
