"""The coding env served over real sockets: hostile code in one session leaves the server and a
second session healthy, and nothing sandboxed outlives the sessions."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import httpx
import pytest

from openenv.client import GenericEnvClient
from openenv.plugins import PluginManager
from openenv.testing import live_server
from openenv_env_coding.env import CodingEnv
from openenv_sandbox import Limits, default_sandbox
from openenv_sandbox.host import processes_of

pytestmark = [pytest.mark.requires_plugins("transport-ws"),
              pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")]
TOKEN = "served-test-token-0123456789"


def _slot_uids() -> range:
    """The uids of the served env's sandbox: the server runs in this process (live_server), so it
    is this process's default_sandbox(), whose uids are leased on this host for it alone."""
    uids = default_sandbox().uids
    assert uids is not None
    return uids


class QuickCodingEnv(CodingEnv):
    run_limits = Limits(cpu_time_s=1, wall_time_s=1.5, output_bytes=8192)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, int]]:
    from openenv_transport_ws import plugin as ws

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(ws)
    with live_server(QuickCodingEnv, transports=["ws"], plugin_manager=pm, max_sessions=4, token=TOKEN) as srv:
        yield srv.url, srv.port


HOSTILE = {
    "fork bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    "token": ("import os\nprint(os.environ.get('OPENENV_TOKEN'))\n"
              f"print(open('/proc/{os.getpid()}/environ', 'rb').read())\n"),
    "kill server": f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)\n",
    "kill parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "infinite loop": "while True:\n    pass\n",
}


async def _play(base: str, port: int) -> dict[str, dict]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    outcomes: dict[str, dict] = {}
    async with GenericEnvClient(base, headers=headers) as hostile, GenericEnvClient(base, headers=headers) as other:
        await hostile.reset(task_id="add")
        await other.reset(task_id="add")
        codes = {**HOSTILE, "socket": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n"}
        for name, code in codes.items():
            await hostile.reset(task_id="add")
            result = await hostile.step({"code": code})
            outcomes[name] = result.observation
            probe = await other.step({"code": "print(6 * 7)"})
            assert probe.observation["stdout"] == "42\n", (name, probe.observation)
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"{base}/health")).status_code == 200
        final = await other.step({"code": "def add(a, b):\n    return a + b\n", "submit": True})
        outcomes["submit"] = {"reward": final.reward, "done": final.done}
    return outcomes


def test_hostile_code_in_one_session_leaves_the_server_and_other_sessions_alone(
        served: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TOKEN", TOKEN)
    base, port = served
    outcomes = asyncio.run(_play(base, port))
    assert outcomes["fork bomb"]["timed_out"] and outcomes["fork bomb"]["killed_by"] == "wall_time"
    assert outcomes["infinite loop"]["killed_by"] in ("wall_time", "cpu_time")
    assert TOKEN not in outcomes["token"]["stdout"] and outcomes["token"]["stdout"].startswith("None\n")
    assert "PermissionError" in outcomes["token"]["stderr"]
    assert "PermissionError" in outcomes["kill server"]["stderr"]
    assert "PermissionError" in outcomes["kill parent"]["stderr"]
    # socket(AF_INET) itself is refused (seccomp); the network namespace is the second wall behind it
    assert "PermissionError: [Errno 1]" in outcomes["socket"]["stderr"]
    assert outcomes["submit"] == {"reward": 1.0, "done": True}
    assert processes_of(_slot_uids()) == []


def test_metadata_reports_the_sandbox_boundary(served: tuple[str, int]) -> None:
    base, _ = served
    md = httpx.get(f"{base}/metadata", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert md["name"] == "coding" and md["version"] == "0.1.0"
    sandbox = md["sandbox"]
    assert sandbox["network"].startswith("none") and sandbox["privileges"].startswith("dropped to uid")
    assert sandbox["runner"].startswith("warm zygote") and "gvisor_runsc" in sandbox
    assert sandbox["syscall_filter"].startswith("seccomp: ") and sandbox["gvisor"] is False
    assert sandbox["enforced"] and sandbox["not_enforced"] and sandbox["outermost_boundary"]
