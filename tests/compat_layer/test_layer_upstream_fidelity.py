"""The fixtures are genuine upstream code: they run unchanged on upstream OpenEnv 0.10 itself.

Needs upstream's interpreter (``OPENENV_UPSTREAM_PYTHON``, the venv ``nox -s compat`` builds);
skipped otherwise. Each check runs in that interpreter as a subprocess:

* every fixture's ``server/app.py`` builds upstream's FastAPI app;
* the fixtures' own clients, running on upstream's client library, drive the same fixtures served
  by *our* kernel (so the layer is faithful from both sides).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from layer_helpers import FIXTURES

pytestmark = pytest.mark.compat

UPSTREAM_ENV_VAR = "OPENENV_UPSTREAM_PYTHON"


@pytest.fixture(scope="module")
def upstream_python() -> str:
    python = os.environ.get(UPSTREAM_ENV_VAR)
    if not python:
        pytest.skip(f"{UPSTREAM_ENV_VAR} is not set: point it at a python with openenv==0.10.0 "
                    "(`nox -s compat` builds one under .nox/upstream-openenv-0.10).")
    if not Path(python).exists():
        pytest.fail(f"{UPSTREAM_ENV_VAR}={python} does not exist.")
    return python


def run_upstream(python: str, code: str) -> dict[str, object]:
    """Run ``code`` on upstream's interpreter with the fixtures importable; it prints one JSON line."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENENV_"))}
    prelude = f"import json, sys\nsys.path.insert(0, {str(FIXTURES)!r})\n"
    done = subprocess.run([python, "-c", prelude + code], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_fixture_apps_build_on_upstream(upstream_python: str) -> None:
    out = run_upstream(upstream_python, """
import openenv
apps = {}
for pkg in ("upstream_style_echo", "upstream_style_mcp_echo", "upstream_style_guess"):
    mod = __import__(pkg + ".server.app", fromlist=["app"])
    apps[pkg] = type(mod.app).__name__
print(json.dumps({"apps": apps, "upstream": "site-packages" in openenv.__file__}))
""")
    assert out["upstream"] is True
    assert out["apps"] == dict.fromkeys(
        ["upstream_style_echo", "upstream_style_mcp_echo", "upstream_style_guess"], "FastAPI")


def test_fixture_client_on_upstream_drives_our_server(upstream_python: str, echo_url: str) -> None:
    out = run_upstream(upstream_python, f"""
from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv
with UpstreamStyleEchoEnv(base_url={echo_url!r}).sync() as env:
    env.reset(episode_id="from-upstream")
    r = env.step(UpstreamStyleEchoAction(message="Hello"))
    s = env.state()
print(json.dumps({{"echo": r.observation.echoed_message, "reward": r.reward, "state": [s.episode_id, s.step_count]}}))
""")
    assert out == {"echo": "Hello", "reward": 0.5, "state": ["from-upstream", 1]}


def test_fixture_mcp_client_on_upstream_drives_our_server(upstream_python: str, mcp_echo_url: str) -> None:
    out = run_upstream(upstream_python, f"""
import asyncio
from upstream_style_mcp_echo import UpstreamStyleMcpEchoEnv
async def main():
    async with UpstreamStyleMcpEchoEnv(base_url={mcp_echo_url!r}) as env:
        await env.reset()
        tools = [t.name for t in await env.list_tools()]
        return tools, await env.call_tool("echo_with_length", message="abc")
tools, result = asyncio.run(main())
print(json.dumps({{"tools": tools, "result": result}}))
""")
    assert out == {"tools": ["echo_message", "echo_with_length", "divide"],
                   "result": {"message": "abc", "length": 3}}
