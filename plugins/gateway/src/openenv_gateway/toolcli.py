"""``openenv-tool``: the episode's env tools as a shell command, for agents that only run commands.

Inside a ``CommandHarness`` episode with tools, ``openenv-tool`` is on the agent's ``PATH``::

    openenv-tool list                          # one line per tool: name and description
    openenv-tool schema NAME                   # the tool's JSON Schema
    openenv-tool call NAME '{"code": "..."}'   # arguments as one JSON object ...
    openenv-tool call NAME code=@solution.py n=3   # ... or key=value pairs (@FILE reads a file)

``call`` prints the tool's result (text as is, anything else as JSON) and exits 0; a tool error or
an unknown tool prints the reason on stderr and exits 1; a usage error exits 2. It talks to
``OPENENV_TOOLS_URL`` with the episode's key (``OPENAI_API_KEY``), standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["main"]

_USAGE = ("usage: openenv-tool list | schema NAME | call NAME ['{json}' | key=value ... (value @FILE reads a file)]")


class _Usage(Exception):
    pass


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    url, key = os.environ.get("OPENENV_TOOLS_URL"), os.environ.get("OPENAI_API_KEY", "")
    if not url:
        raise _Usage("OPENENV_TOOLS_URL is not set: openenv-tool runs inside a harness episode that has tools")
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=float(os.environ.get("OPENENV_TOOL_TIMEOUT_S", "600"))) as answer:
            reply = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        try:
            detail = json.loads(detail)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass
        raise RuntimeError(f"the tools endpoint answered {exc.code}: {detail}") from None
    if "error" in reply:
        raise RuntimeError(str(reply["error"].get("message", reply["error"])))
    result = reply.get("result")
    return result if isinstance(result, dict) else {}


def _arguments(words: list[str]) -> dict[str, Any]:
    if len(words) == 1 and words[0].lstrip().startswith("{"):
        try:
            value = json.loads(words[0])
        except ValueError as exc:
            raise _Usage(f"the arguments are not a JSON object: {exc}") from None
        if not isinstance(value, dict):
            raise _Usage("the arguments must be a JSON object")
        return value
    out: dict[str, Any] = {}
    for word in words:
        name, sep, raw = word.partition("=")
        if not sep or not name:
            raise _Usage(f"{word!r} is not key=value (or give all arguments as one JSON object)")
        if raw.startswith("@"):
            try:
                out[name] = Path(raw[1:]).read_text(encoding="utf-8")
            except OSError as exc:
                raise _Usage(f"{name}=@{raw[1:]}: {exc.strerror or exc}") from None
            continue
        try:
            out[name] = json.loads(raw)  # numbers, booleans, lists; anything else stays a string
        except ValueError:
            out[name] = raw
    return out


def _tools() -> list[dict[str, Any]]:
    tools = _rpc("tools/list", {}).get("tools", [])
    return [t for t in tools if isinstance(t, dict)]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] in ("-h", "--help"):
            print(__doc__ if args else _USAGE)
            return 0 if args else 2
        command, rest = args[0], args[1:]
        if command == "list":
            for tool in _tools():
                first_line = (str(tool.get("description") or "").splitlines() or [""])[0]
                print(f"{tool.get('name')}\t{first_line}")
            return 0
        if command == "schema" and len(rest) == 1:
            found = [t for t in _tools() if t.get("name") == rest[0]]
            if not found:
                raise RuntimeError(f"no tool named {rest[0]!r}; `openenv-tool list` shows them")
            print(json.dumps(found[0].get("inputSchema") or {}, indent=2))
            return 0
        if command == "call" and rest:
            result = _rpc("tools/call", {"name": rest[0], "arguments": _arguments(rest[1:])})
            if result.get("error"):
                error = result["error"]
                print(error.get("message", error) if isinstance(error, dict) else error, file=sys.stderr)
                return 1
            data = result.get("data")
            print(data if isinstance(data, str) else json.dumps(data, default=str))
            return 0
        raise _Usage(_USAGE)
    except _Usage as exc:
        print(f"openenv-tool: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError) as exc:
        print(f"openenv-tool: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
