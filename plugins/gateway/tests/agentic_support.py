"""Shared by the RFC 005 harness tests: a tool env around ``agents/turn_agent.py``, and a process count."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from fastmcp import FastMCP

from openenv_gateway.agentic.command import CommandTurnAdapter
from openenv_gateway.agentic.config import HarnessConfig
from openenv_gateway.agentic.environment import HarnessEnvironment

AGENT = str(Path(__file__).parent / "agents" / "turn_agent.py")
#: The agents' working directories, one folder per adapter inside this one, removed when the test
#: process ends (a served env builds adapters of its own, so no test can remove them one by one).
WORKDIRS = tempfile.mkdtemp(prefix="openenv-turn-workdirs-")
atexit.register(shutil.rmtree, WORKDIRS, True)


def tools_server() -> FastMCP:
    mcp = FastMCP("arith")

    @mcp.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return mcp


def adapter(marker: str, *, gateway: Any = None, session_timeout_s: float = 30.0, builtin: tuple[str, ...] = ("add",),
            command: list[str] | None = None, startup_timeout_s: float = 20.0) -> CommandTurnAdapter:
    config = HarnessConfig(name="turn-agent", command=command or [sys.executable, AGENT, marker],
                           working_directory=tempfile.mkdtemp(dir=WORKDIRS), model="m",
                           session_timeout_s=session_timeout_s, startup_timeout_s=startup_timeout_s)
    return CommandTurnAdapter(config, gateway=gateway, builtin_tools=builtin, terminate_grace_s=2.0)


class TurnEnv(HarnessEnvironment):
    """The turn agent with an ``add`` tool (renamed ``env_add``: the agent claims ``add`` as its own).
    Class settings, so a server can build it with no arguments."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance has its own working directory
    gateway: Any = None
    marker = "openenv-turn-" + uuid.uuid4().hex
    session_timeout_s = 30.0
    command: list[str] | None = None  # None: the turn agent

    def __init__(self) -> None:
        cls = type(self)
        super().__init__(adapter(cls.marker, gateway=cls.gateway, session_timeout_s=cls.session_timeout_s,
                                 command=cls.command), tools_server())


def processes_with(marker: str) -> list[int]:
    """Pids of live processes (not zombies) whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found
