"""``CommandHarness(runtime="docker")``: the agent program in a container of its own with no network
but the bridged gateway — its model call captured, the env's tools reachable through
``openenv-tool``, nothing else reachable, read-only root, no capabilities — and the deadline
removing the container."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from openenv_provider_docker.fixtures import docker_client  # noqa: F401 - fixture

pytestmark = [pytest.mark.docker, pytest.mark.requires_plugins("gateway", "provider-docker")]

#: The agent: a model call through the gateway, a look at what else it can reach and do, the env's
#: tool through `openenv-tool`, then its answer in solution.py.
AGENT = r'''
import json, os, socket, subprocess, urllib.request
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": os.environ["OPENENV_PROMPT"]}]}).encode()
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, method="POST",
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=60).read()
report = {"uid": os.getuid()}
try:  # the inference server, reachable from the host: not from here
    socket.create_connection(("127.0.0.1", int(os.environ["UPSTREAM_PORT"])), timeout=3).close()
    report["upstream"] = "reached"
except OSError as exc:
    report["upstream"] = type(exc).__name__
try:
    open("/etc/agent-was-here", "w")
    report["root_fs"] = "writable"
except OSError:
    report["root_fs"] = "read-only"
report["tool"] = subprocess.run(["openenv-tool", "call", "echo", "text=hi"], capture_output=True, text=True).stdout
open("solution.py", "w").write(json.dumps(report))
'''


@pytest.fixture(scope="module")
def image(docker_client: Any) -> str:  # noqa: F811
    from openenv_provider_docker.testing import base_image_for_tests

    found = base_image_for_tests(docker_client)
    if found is None:
        pytest.skip("no base image with python3 in the engine (run .ci/docker-setup.sh)")
    return found


@pytest.fixture(scope="module")
def gateway() -> Iterator[tuple[Any, str]]:
    from openenv_gateway import CaptureGateway
    from openenv_gateway.testing.process import ServerProcess

    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted", "--port", "0"]) as upstream:
        gw = CaptureGateway(upstream.base_url)
        with gw:
            yield gw, upstream.base_url


def _echo_tools(request: dict[str, Any]) -> dict[str, Any]:
    if request["method"] == "tools/list":
        return {"jsonrpc": "2.0", "id": request["id"], "result": {"tools": [
            {"name": "echo", "description": "echo", "inputSchema": {"type": "object"}}]}}
    text = request["params"]["arguments"]["text"]
    return {"jsonrpc": "2.0", "id": request["id"], "result": {"data": "echo:" + text, "done": False,
                                                              "metadata": {}, "error": None}}


def _left(label_value: str) -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=org.openenv.harness={label_value}"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return out.split()


def test_the_agent_runs_in_a_container_with_the_gateway_as_its_only_address(
        image: str, gateway: tuple[Any, str]) -> None:
    import os

    from openenv_gateway.harness import CommandHarness, Verdict

    gw, upstream_url = gateway
    harness = CommandHarness(gw, ["python3", "-c", AGENT], runtime="docker", image=image, deadline_s=120,
                             grade_reserve_s=20, extra_env={"UPSTREAM_PORT": str(urlparse(upstream_url).port)})
    episode = harness.run(episode_id="in-a-box", prompt="go", tools=_echo_tools,
                          verdict=lambda run: Verdict(reward=1.0, info={"solution": json.loads(
                              (run.workdir / "solution.py").read_text())}))
    assert episode.error is None, (episode.error, episode.run.stderr if episode.run else None)
    report = episode.verdict.info["solution"]  # type: ignore[union-attr]
    assert report["uid"] == os.getuid()
    assert report["upstream"] in ("ConnectionRefusedError", "OSError", "TimeoutError")
    assert report["root_fs"] == "read-only"
    assert report["tool"].strip() == "echo:hi"
    assert len(episode.trace.turns) == 1 and episode.trace.turns[0].ids_source == "engine"
    assert _left(str(os.getpid())) == []


def test_the_deadline_removes_the_container(image: str, gateway: tuple[Any, str]) -> None:
    import os

    from openenv_gateway.harness import CommandHarness, Verdict

    gw, _ = gateway
    harness = CommandHarness(gw, ["python3", "-c", "import time; time.sleep(600)"], runtime="docker", image=image,
                             deadline_s=12, grade_reserve_s=4)
    episode = harness.run(episode_id="hangs", prompt="go", verdict=lambda run: Verdict(reward=0.0))
    assert episode.run is not None and episode.run.timed_out
    assert episode.error is not None and episode.error["kind"] == "deadline"
    assert _left(str(os.getpid())) == []


def test_docker_runtime_needs_an_image() -> None:
    from openenv_gateway import CaptureGateway
    from openenv_gateway.harness import CommandHarness

    with pytest.raises(ValueError, match="give the image"):
        CommandHarness(CaptureGateway("http://127.0.0.1:9"), ["true"], runtime="docker")
