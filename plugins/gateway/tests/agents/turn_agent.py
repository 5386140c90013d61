"""A test harness program speaking CommandTurnAdapter's JSON-lines protocol.

Each message is a command: ``tool <name> <json arguments>`` calls an injected env tool through the
MCP bridge (``OPENENV_HARNESS_TOOLS_URL``); ``model <text>`` makes one chat call through the
gateway (``OPENAI_BASE_URL``); ``both`` does a model call and then calls the first injected tool
with ``{"a": 2, "b": 3}``; ``crash`` exits mid-turn; ``hang`` never answers; ``spawn`` starts a
helper process (its pid is the response); ``chatty`` prints a non-JSON line before answering;
``done`` ends the episode; anything else is echoed.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import httpx


def emit(kind: str, **data: object) -> None:
    print(json.dumps({"type": kind, "data": data}), flush=True)


async def call_tool(name: str, arguments: dict) -> str:
    from fastmcp import Client

    async with Client(os.environ["OPENENV_HARNESS_TOOLS_URL"]) as client:
        result = await client.call_tool(name, arguments)
    return str(result.content[0].text)


def call_model(text: str) -> str:
    messages = [{"role": "user", "content": text}]
    emit("llm_request", messages=messages, model=os.environ.get("OPENENV_MODEL", "m"))
    reply = httpx.post(os.environ["OPENAI_BASE_URL"] + "/chat/completions", timeout=30,
                       headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
                       json={"model": os.environ.get("OPENENV_MODEL", "m"), "messages": messages}).json()
    content = reply["choices"][0]["message"]["content"]
    emit("llm_response", content=content, usage=reply.get("usage"))
    return str(content)


def turn(content: str) -> None:
    command, _, rest = content.partition(" ")
    if command == "tool":
        name, _, raw = rest.partition(" ")
        arguments = json.loads(raw or "{}")
        emit("tool_call", tool_name=name, arguments=arguments)
        result = asyncio.run(call_tool(name, arguments))
        emit("tool_result", tool_name=name, result=result, error=None)
        emit("turn_complete", response=result)
    elif command == "model":
        emit("turn_complete", response=call_model(rest))
    elif command == "both":
        answer = call_model("please add")
        name = json.loads(os.environ["OPENENV_HARNESS_TOOLS"])[0]["name"]
        emit("tool_call", tool_name=name, arguments={"a": 2, "b": 3})
        result = asyncio.run(call_tool(name, {"a": 2, "b": 3}))
        emit("tool_result", tool_name=name, result=result, error=None)
        emit("turn_complete", response=f"{answer} / {result}")
    elif command == "crash":
        emit("text_output", text="about to crash")
        print("crashing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    elif command == "hang":
        emit("text_output", text="thinking forever")
        time.sleep(3600)
    elif command == "spawn":
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", *sys.argv[1:]])
        emit("turn_complete", response=str(helper.pid))
    elif command == "chatty":
        print("this line is not JSON", flush=True)
        emit("turn_complete", response="said something")
    elif command == "done":
        emit("turn_complete", response="finished", done=True)
    else:
        emit("text_output", text=content)
        emit("turn_complete", response=f"echo: {content}")


def main() -> None:
    print("turn agent starting", file=sys.stderr, flush=True)
    print(json.dumps({"type": "ready"}), flush=True)
    for line in sys.stdin:
        frame = json.loads(line)
        if frame.get("type") == "message":
            turn(frame["content"])


if __name__ == "__main__":
    main()
