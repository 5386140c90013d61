"""The agent program in a Docker container of its own: ``CommandHarness(runtime="docker", image=...)``.

The container has no network (``--network none``): the gateway is bridged in exactly as under
bubblewrap (``openenv_gateway.netbridge``): outside, a ``UnixBridge`` on a Unix socket in the
episode's working directory; inside, ``netbridge.py`` (standard library only, mounted read-only
from this package, run by the image's ``python3``) listens on the container's ``127.0.0.1:<the
gateway's port>`` and runs the agent. So the agent's ``OPENAI_BASE_URL`` is the same URL as on the
host, and the gateway is the only address it can reach.

The working directory is bind-mounted at the same path (the agent's ``HOME``, ``TMPDIR`` and
current directory; what it leaves there is graded); ``openenv-tool`` (``toolcli.py``, standard
library only) is mounted beside ``netbridge.py``. The container runs as the harness's own uid/gid
with every capability dropped, ``no-new-privileges``, a read-only root file system with a ``/tmp``
tmpfs, and bounded PIDs, memory and CPUs. Secrets (the episode's key) reach it by name (``-e
NAME``: the Docker CLI copies the value from its own environment), never on a command line.

Every container carries the labels ``org.openenv.managed=true`` and ``org.openenv.harness=<pid of
the harness>``; the deadline removes it (``docker rm -f``), and so does the end of every episode.
Needs the image to have ``python3`` (3.8 or later) and the agent's own program.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONTAINER_PATH", "DockerLimits", "LABEL", "docker_argv", "remove_container", "tool_wrapper"]

#: Where this package's two stdlib-only helpers are mounted inside the container.
_MOUNT = "/opt/openenv-gateway"
#: The ``PATH`` of the agent inside the container (the image's own tools, not the host's).
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The label naming the harness process that started a container (``docker ps --filter label=...``).
LABEL = "org.openenv.harness"


@dataclass(frozen=True)
class DockerLimits:
    """What one agent container may use."""

    memory: str = "2g"
    cpus: float = 1.0
    pids: int = 256


def tool_wrapper() -> str:
    """The ``openenv-tool`` script for inside the container (the image's ``python3``)."""
    return f'#!/bin/sh\nexec python3 {_MOUNT}/toolcli.py "$@"\n'


def docker_argv(*, image: str, workdir: Path, sock: Path, port: int, command: list[str], env_names: list[str],
                env_values: dict[str, str], limits: DockerLimits | None = None) -> tuple[list[str], str]:
    """``docker run`` of ``command`` in ``image`` behind the gateway bridge; returns (argv, container name).

    ``env_names`` are passed by name (their values come from the CLI's environment: secrets);
    ``env_values`` by value (not secret: paths, the model name)."""
    limits = limits or DockerLimits()
    here = Path(__file__).resolve().parent
    name = f"openenv-agent-{secrets.token_hex(6)}"
    argv = ["docker", "run", "--rm", "-i", "--name", name,
            "--label", "org.openenv.managed=true", "--label", f"{LABEL}={os.getpid()}",
            "--network", "none", "--user", f"{os.getuid()}:{os.getgid()}",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,size=256m",
            "--pids-limit", str(limits.pids), "--memory", limits.memory, "--cpus", str(limits.cpus),
            "-v", f"{workdir}:{workdir}", "-w", str(workdir),
            "-v", f"{here / 'netbridge.py'}:{_MOUNT}/netbridge.py:ro",
            "-v", f"{here / 'toolcli.py'}:{_MOUNT}/toolcli.py:ro"]
    for key in env_names:
        argv += ["-e", key]
    for key, value in env_values.items():
        argv += ["-e", f"{key}={value}"]
    argv += [image, "python3", f"{_MOUNT}/netbridge.py", "--sock", str(sock), "--port", str(port), "--", *command]
    return argv, name


def remove_container(name: str) -> None:
    """``docker rm -f name`` (quietly: the container may already be gone, removed by ``--rm``)."""
    docker = shutil.which("docker")
    if docker is None:
        return
    subprocess.run([docker, "rm", "-f", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=False)
