"""Helpers for real-engine tests of container providers (ours, and third parties' on top of them).

No pytest import here: fixtures live in the test suites' ``conftest.py`` and call these.

* ``engine_skip_reason()`` / ``swarm_skip_reason()`` – why tests cannot run here, or ``None``.
* ``base_image_for_tests()`` – the base image tests build on: ``$OPENENV_BASE_IMAGE``, else the locally
  made ``openenv-base:bookworm`` (``.ci/docker-setup.sh``), else ``None``.
* ``spawn_orphan(...)`` – starts a server from a child process that is then killed with SIGKILL,
  so its resources outlive their owner (what ``gc`` is for).
* ``leftovers(...)`` / ``wait_for_no_leftovers(...)`` – containers, services and networks that
  carry given labels or belong to given owners.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from openenv.interfaces import LaunchSpec
from openenv.protocol import T_RESET, T_STATE, T_STEP
from openenv_provider_docker.engine import EngineUnavailable, connect
from openenv_provider_docker.naming import LABEL_MANAGED, LABEL_OWNER

if TYPE_CHECKING:
    import docker

__all__ = [
    "LOCAL_BASE_IMAGE",
    "LOCAL_GIT_BASE_IMAGE",
    "RUN_LABELS",
    "Orphan",
    "echo_spec",
    "raw_episode",
    "raw_round_trip",
    "engine_skip_reason",
    "leftovers",
    "spawn_orphan",
    "swarm_skip_reason",
    "base_image_for_tests",
    "git_base_image_for_tests",
    "wait_for_no_leftovers",
]

#: The base image ``.ci/docker-setup.sh`` makes offline with debootstrap.
LOCAL_BASE_IMAGE = "openenv-base:bookworm"
#: The base plus Debian's git (``.ci/docker-setup.sh`` makes it), for envs whose commands need git.
LOCAL_GIT_BASE_IMAGE = "openenv-base:bookworm-git"
#: Labels put on everything a test run starts, so the run can prove it left nothing behind.
RUN_LABELS = {"org.openenv.test-run": uuid.uuid4().hex}


def engine_skip_reason() -> str | None:
    """``None`` when a Docker-API engine answers, else a reason naming how to get one."""
    try:
        connect(timeout_s=10).close()
    except EngineUnavailable:
        where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        return (f"no Docker engine answers at {where}: run .ci/docker-setup.sh to start one "
                "(or point DOCKER_HOST at an engine)")
    return None


def swarm_skip_reason(client: docker.DockerClient) -> str | None:
    """``None`` when the engine is a Swarm manager."""
    swarm = client.info().get("Swarm") or {}
    if swarm.get("LocalNodeState") == "active" and swarm.get("ControlAvailable"):
        return None
    return ("the Docker engine is not a Swarm manager (state "
            f"{swarm.get('LocalNodeState') or 'unknown'}): run `docker swarm init --advertise-addr "
            "127.0.0.1` (.ci/docker-setup.sh does).")


def base_image_for_tests(client: docker.DockerClient) -> str | None:
    """The base image to build test images on, if one is present in the engine."""
    return _first_present(client, os.environ.get("OPENENV_BASE_IMAGE"), LOCAL_BASE_IMAGE)


def git_base_image_for_tests(client: docker.DockerClient) -> str | None:
    """A base image with git (``$OPENENV_GIT_BASE_IMAGE``, else ``openenv-base:bookworm-git``), if present."""
    return _first_present(client, os.environ.get("OPENENV_GIT_BASE_IMAGE"), LOCAL_GIT_BASE_IMAGE)


def _first_present(client: docker.DockerClient, *candidates: str | None) -> str | None:
    from docker.errors import ImageNotFound

    for candidate in filter(None, candidates):
        try:
            client.images.get(candidate)
            return candidate
        except ImageNotFound:
            continue
    return None


@dataclass
class Orphan:
    """What the killed child started: the resource id, its URL, and the child's owner id."""

    id: str
    base_url: str
    owner: str
    steps: int


_CHILD = textwrap.dedent("""
    import json, sys, time
    from openenv.interfaces import LaunchSpec, owner_id
    args = json.loads(sys.argv[1])
    spec = LaunchSpec(env=args["env"], image=args["image"], options=args["options"],
                      startup_timeout_s=args["timeout"])
    from openenv.plugins import get_plugin_manager
    provider = get_plugin_manager().catalog.providers.load(args["provider"])()
    steps = 0
    if args["client"]:
        from openenv.client import SyncEnvClient
        client = SyncEnvClient.from_provider(args["env"], args["provider"], launch=spec)
        client.reset()
        client.step({"message": "before SIGKILL"})
        steps = 1
    else:
        provider.start(spec)
    (mine,) = provider.ps()  # this child's one server, as the provider sees it
    print(json.dumps({"id": mine.id, "base_url": mine.base_url, "owner": owner_id(),
                      "steps": steps}), flush=True)
    time.sleep(600)
""")


def spawn_orphan(provider: str, env: str, *, image: str | None = None,
                 options: dict[str, Any] | None = None, client: bool = False,
                 timeout_s: float = 120.0) -> Orphan:
    """Start ``env`` through ``provider`` in a child process, then SIGKILL the child.

    With ``client=True`` the child is a real client: it starts the server with
    ``SyncEnvClient.from_provider`` and plays a step before it is killed (needs a client
    transport installed). Returns once the child is dead and reaped, so its owner id is dead.
    """
    args = {"provider": provider, "env": env, "image": image, "options": options or {},
            "client": client, "timeout": timeout_s}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        line = _read_line(child, timeout_s + 30)
        if not line:
            child.kill()
            _, err = child.communicate(timeout=30)
            raise RuntimeError(f"the child exited (code {child.returncode}) before reporting:\n{err[-3000:]}")
        info = json.loads(line)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)  # reaped: /proc/<pid> is gone, so owner_alive() is False
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    return Orphan(id=info["id"], base_url=info["base_url"], owner=info["owner"], steps=info["steps"])


def _read_line(child: subprocess.Popen[str], timeout_s: float) -> str:
    import selectors

    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    try:
        if not selector.select(timeout_s):
            return ""
        return child.stdout.readline().strip()
    finally:
        selector.close()


def leftovers(client: docker.DockerClient, *, labels: dict[str, str] | None = None,
              owners: set[str] | None = None) -> dict[str, list[str]]:
    """Managed containers, services and networks that carry all ``labels`` or whose owner is in
    ``owners``; ``{}`` when there are none."""
    found: dict[str, list[str]] = {}

    def keep(resource_labels: dict[str, str] | None) -> bool:
        resource_labels = resource_labels or {}
        if resource_labels.get(LABEL_MANAGED) != "true":
            return False
        if labels and all(resource_labels.get(k) == v for k, v in labels.items()):
            return True
        return owners is not None and resource_labels.get(LABEL_OWNER) in owners

    flt = {"label": [f"{LABEL_MANAGED}=true"]}
    # The low-level list answers in one call: ``containers.list`` inspects each container after
    # listing it, and one that Docker or Swarm removes in between (a finished task) raised NotFound.
    containers = [str((c.get("Names") or [c["Id"]])[0]).lstrip("/")
                  for c in client.api.containers(all=True, filters=flt) if keep(c.get("Labels"))]
    networks = [n.name for n in client.networks.list(filters=flt) if keep(n.attrs.get("Labels"))]
    services: list[str] = []
    if (client.info().get("Swarm") or {}).get("ControlAvailable"):
        services = [s["Spec"]["Name"] for s in client.api.services(filters=flt)
                    if keep(s["Spec"].get("Labels"))]
    for kind, names in (("containers", containers), ("services", services), ("networks", networks)):
        if names:
            found[kind] = sorted(names)
    return found


def wait_for_no_leftovers(client: docker.DockerClient, *, timeout_s: float = 20.0,
                          labels: dict[str, str] | None = None,
                          owners: set[str] | None = None) -> dict[str, list[str]]:
    """Poll ``leftovers`` until empty (Swarm removes networks asynchronously); returns the last
    non-empty result after ``timeout_s``, or ``{}``."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = leftovers(client, labels=labels, owners=owners)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def echo_spec(image: str, **options: Any) -> LaunchSpec:
    """A launch spec for the echo image, labelled with this run's id; ``token``, ``env_vars``
    and ``startup_timeout_s`` are taken out of ``options``."""
    token = options.pop("token", None)
    env_vars = options.pop("env_vars", {})
    timeout = options.pop("startup_timeout_s", 60.0)
    return LaunchSpec(env="echo", image=image, token=token, env_vars=env_vars,
                      startup_timeout_s=timeout, options={"labels": dict(RUN_LABELS), **options})


def raw_episode(base_url: str, *, token: str | None = None, message: str = "hello") -> list[dict[str, Any]]:
    """reset + step + state over raw /ws frames (no client transport needed); returns the replies."""
    from websockets.sync.client import connect as ws_connect

    from openenv.urls import ws_base_url

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = ws_base_url(base_url) + "/ws"
    replies = []
    with ws_connect(url, additional_headers=headers, open_timeout=10, proxy=None) as ws:
        for frame in ({"type": T_RESET, "data": {}}, {"type": T_STEP, "data": {"message": message}},
                      {"type": T_STATE}):
            ws.send(json.dumps(frame))
            replies.append(json.loads(ws.recv(timeout=10)))
        ws.send('{"type":"close"}')
    return replies


def raw_round_trip(handle: Any, spec: LaunchSpec) -> None:
    """The provider contract's ``round_trip`` check over raw frames: reset, step, state answered."""
    replies = raw_episode(handle.base_url, token=spec.token)
    assert [r["type"] for r in replies] == ["observation", "observation", "state"], replies


def skip_unless_required(reason: str) -> NoReturn:
    """Skip a real-engine test for ``reason``, or fail it when ``OPENENV_REQUIRE_DOCKER=1``.

    CI sets the variable after starting an engine, so a broken engine set-up fails loudly there
    instead of silently skipping every real-engine test.
    """
    import pytest

    if os.environ.get("OPENENV_REQUIRE_DOCKER", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_DOCKER is set but {reason}", pytrace=False)
    pytest.skip(reason)

