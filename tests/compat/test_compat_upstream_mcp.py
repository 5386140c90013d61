"""Upstream openenv 0.10's own ``MCPToolClient`` lists and calls tools on our ``echo_mcp`` env."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_harness import HOST, UPSTREAM_SIDE, ServerProcess, _spawn, upstream_env

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def ours_mcp(upstream_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("compat-mcp")
    argv = [sys.executable, "-m", "openenv", "serve", "echo_mcp", "--host", HOST, "--port", "0",
            "--max-sessions", "4", "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "OPENENV_MODE")}
    env["OPENENV_DIE_WITH_PARENT"] = "1"
    server = _spawn("ours_mcp", argv, workdir, env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_upstream_mcp_tool_client_drives_our_echo_mcp(upstream_python: str, ours_mcp: ServerProcess) -> None:
    done = subprocess.run([upstream_python, str(Path(UPSTREAM_SIDE) / "drive_mcp.py"), ours_mcp.url()],
                          capture_output=True, text=True, timeout=120, env=upstream_env())
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["reset_done"] is False
    assert out["tools"] == ["echo_message", "echo_with_length"]
    assert "properties" in out["schema_keys"] and "type" in out["schema_keys"]
    assert out["echo"] == "Hello from upstream"
    assert out["with_length"] == {"message": "Test", "length": 4}
    assert out["unknown_tool"] is not None and out["unknown_tool"].startswith("Tool 'nope' failed:")
    assert out["bad_args"] is not None and out["bad_args"].startswith("Tool 'echo_message' failed:")
    assert out["after_errors"] == "still here"  # the session survived both errors
    assert out["state_has_episode"] is True
