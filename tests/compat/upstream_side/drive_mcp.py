"""Runs in upstream's venv: upstream 0.10's own MCPToolClient against OUR echo_mcp server.

Prints one JSON object of observations; the pytest side asserts on it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from openenv.core.mcp_client import MCPToolClient


async def main(base_url: str) -> dict:
    out: dict = {}
    async with MCPToolClient(base_url=base_url) as env:
        reset = await env.reset()
        out["reset_done"] = reset.done
        tools = await env.list_tools()
        out["tools"] = sorted(t.name for t in tools)
        out["schema_keys"] = sorted(next(t for t in tools if t.name == "echo_message").input_schema)
        out["echo"] = await env.call_tool("echo_message", message="Hello from upstream")
        out["with_length"] = await env.call_tool("echo_with_length", message="Test")
        try:
            await env.call_tool("nope")
            out["unknown_tool"] = None
        except RuntimeError as exc:
            out["unknown_tool"] = str(exc)
        try:
            await env.call_tool("echo_message", msg="wrong argument name")
            out["bad_args"] = None
        except RuntimeError as exc:
            out["bad_args"] = str(exc)
        out["after_errors"] = await env.call_tool("echo_message", message="still here")
        state = await env.state()
        out["state_has_episode"] = state.episode_id is not None
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
