"""The Docker runtime: a task's image built offline, the agent's container, grading in a fresh one.

* :func:`build` builds ``environment/Dockerfile`` with no network (``FROM openenv-harbor-base`` is
  our base image, :data:`BASE_IMAGE`), labelled :data:`LABEL`; a failed build raises
  :class:`~openenv_harbor.task.HarborTaskError` naming the Dockerfile, and the layers it made are removed.
* :func:`start` runs the agent's container (no network unless ``allow_internet``, the task's cpus
  and memory), :func:`exec_command` runs a command in it with a time limit.
* :func:`grade` commits the agent's container to an image (``docker commit``), starts a FRESH
  container from it as uid 65534 with no network, the task's original ``tests/`` bound read-only
  at ``/tests`` and an empty ``/logs`` bound from the host, runs ``bash /tests/test.sh`` in ``/app``
  and reads the reward fail-closed (:func:`openenv_harbor.box.read_reward`); the snapshot image and
  the grading container are removed afterwards.
* :func:`close` removes the agent's container and the task's image. Everything this module makes
  carries :data:`LABEL`, so a test can count what is left.

The Docker CLI is used (no SDK dependency); the daemon must see this machine's folders (bind
mounts), i.e. a local engine.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from openenv_harbor.box import GRADER_UID, BoxResult, Grade, read_reward
from openenv_harbor.task import HarborTask, HarborTaskError

__all__ = ["BASE_IMAGE", "LABEL", "Container", "available", "build", "close", "dockerfile_digest", "exec_command",
           "grade", "leftovers", "push", "run_oracle", "start"]

#: What ``FROM openenv-harbor-base`` means here (.ci/docker-setup.sh makes it): Debian with python3 and git.
BASE_IMAGE = os.environ.get("OPENENV_HARBOR_BASE_IMAGE", "openenv-base:bookworm-git")
LABEL = "org.openenv.harbor"
_FROM = re.compile(r"^(\s*FROM\s+)openenv-harbor-base(\s|$)", re.IGNORECASE | re.MULTILINE)


@dataclass
class Container:
    """The agent's container of one task, and the image it runs."""

    task: HarborTask
    image: str
    id: str


def _docker(*args: str, timeout: float = 120, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["docker", *args], capture_output=True, timeout=timeout, input=input)


def available() -> bool:
    """Whether a Docker engine answers here."""
    if shutil.which("docker") is None:
        return False
    try:
        return _docker("info", "--format", "{{.ServerVersion}}", timeout=20).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def leftovers() -> tuple[list[str], list[str]]:
    """Containers and images (every one, intermediate layers too) carrying :data:`LABEL`."""
    containers = _docker("ps", "-aq", "--filter", f"label={LABEL}").stdout.decode().split()
    images = _docker("images", "-aq", "--filter", f"label={LABEL}").stdout.decode().split()
    return containers, images


def _dockerfile_text(task: HarborTask) -> str:
    return _FROM.sub(lambda m: f"{m[1]}{BASE_IMAGE}{m[2]}", task.dockerfile.read_text(encoding="utf-8"))


def dockerfile_digest(task: HarborTask) -> str:
    """12 hex digits of the Dockerfile as built (the image tag)."""
    return hashlib.sha256(_dockerfile_text(task).encode()).hexdigest()[:12]


def build(task: HarborTask) -> str:
    """Build the task's image offline; its tag. Raises HarborTaskError naming the Dockerfile on failure."""
    text = _dockerfile_text(task)
    tag = f"openenv-harbor/{task.id}:{dockerfile_digest(task)}"
    # every layer carries the label (LABEL first after FROM would need a rewrite; --label tags the image)
    argv = ["build", "--network", "none", "--force-rm", "--label", f"{LABEL}=1", "-t", tag, "-f", "-",
            str(task.path / "environment")]
    try:
        done = _docker(*argv, timeout=task.build_timeout_s, input=text.encode())
    except subprocess.TimeoutExpired:
        done = None
    if done is not None and done.returncode == 0:
        return tag
    output = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace") if done else ""
    # The legacy builder keeps the layers of the steps that succeeded: remove them (newest first). Only
    # the layers this build committed (after "Removing intermediate container"): the "--->" after FROM
    # is the base image and after "Using cache" another build's layer, which a forced rmi would delete
    # (on a fresh engine, where nothing was built on the base yet, it did delete the base image).
    for layer in reversed(re.findall(r"Removing intermediate container [0-9a-f]+\s+---> ([0-9a-f]{12})\b", output)):
        _docker("rmi", "-f", layer, timeout=60)
    why = (f"build_timeout_sec={task.build_timeout_s:g} hit" if done is None
           else f"docker build exited {done.returncode}")
    raise HarborTaskError(f"task {task.id!r}: {task.dockerfile}: the image does not build offline on {BASE_IMAGE} "
                          f"({why}):\n{output[-3000:]}", task=task.id, file=str(task.dockerfile))


def _limits(task: HarborTask, network: bool | None = None) -> list[str]:
    online = task.allow_internet if network is None else network
    args = ["--network", "bridge" if online else "none", "--label", f"{LABEL}=1"]
    if task.cpus:
        args += ["--cpus", f"{task.cpus:g}"]
    if task.memory_mb:
        args += ["--memory", f"{task.memory_mb}m"]
    return args


def start(task: HarborTask, image: str | None = None) -> Container:
    """Build (unless ``image`` is given) and start the agent's container; it idles until commands come."""
    image = image or build(task)
    name = f"harbor-{task.id}-{uuid.uuid4().hex[:8]}"
    done = _docker("run", "-d", "--name", name, *_limits(task), "--entrypoint", "sleep", image, "infinity")
    if done.returncode != 0:
        raise HarborTaskError(f"task {task.id!r}: the container did not start: {done.stderr.decode()[-2000:]}",
                              task=task.id)
    return Container(task, image, done.stdout.decode().strip())


def exec_command(container: Container, command: str, timeout_s: float, workdir: str = "/app") -> BoxResult:
    """``bash -c command`` in the container; on the time limit every process but the idle pid 1 is killed."""
    start_t = time.monotonic()
    try:
        done = _docker("exec", "-w", workdir, container.id, "bash", "-c", command, timeout=timeout_s)
        output = (done.stdout + done.stderr).decode("utf-8", "replace")
        return BoxResult(done.returncode, output[-16_000:], time.monotonic() - start_t)
    except subprocess.TimeoutExpired:
        # the CLI was killed, not what it ran: end every process of the container but its pid 1
        _docker("exec", container.id, "bash", "-c", "kill -9 -1", timeout=30)
        return BoxResult(124, "", time.monotonic() - start_t)


def grade(container: Container, scratch: Path | None = None) -> Grade:
    """Commit the agent's container and run the original tests in a fresh container from it, as uid 65534."""
    task = container.task
    start_t = time.monotonic()
    snapshot = _docker("commit", "--change", f"LABEL {LABEL}=1", container.id).stdout.decode().strip()
    name = f"harbor-grade-{task.id}-{uuid.uuid4().hex[:8]}"
    try:
        with tempfile.TemporaryDirectory(prefix=f"harbor-dgrade-{task.id}-", dir=scratch) as tmp:
            tests, logs = Path(tmp) / "tests", Path(tmp) / "logs"
            shutil.copytree(task.path / "tests", tests)
            (logs / "verifier").mkdir(parents=True)
            for path in (Path(tmp), tests, *tests.rglob("*")):
                path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))
            for path in (logs, logs / "verifier"):
                path.chmod(0o777)
            argv = ["run", "--name", name, *_limits(task, network=False), "--user",
                    f"{GRADER_UID}:{GRADER_UID}", "-w", "/app", "-e", "PYTHONSAFEPATH=1", "-e",
                    "GIT_CONFIG_COUNT=2", "-e", "GIT_CONFIG_KEY_0=core.hooksPath", "-e",
                    "GIT_CONFIG_VALUE_0=/dev/null", "-e", "GIT_CONFIG_KEY_1=core.fsmonitor", "-e",
                    "GIT_CONFIG_VALUE_1=false", "-v", f"{tests}:/tests:ro", "-v", f"{logs}:/logs",
                    "--entrypoint", "bash", snapshot, "/tests/test.sh"]
            try:
                done = _docker(*argv, timeout=task.verifier_timeout_s)
                status, output = done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                _docker("kill", name, timeout=30)
                status, output = 124, ""
            reward, components, why = read_reward(logs / "verifier")
            # files the verifier (uid 65534) wrote: removable by us, the temp folder's owner
    finally:
        _docker("rm", "-f", name, timeout=60)
        _docker("rmi", "-f", snapshot, timeout=60)
    if status == 124:
        reward, why = None, f"the verifier ran past [verifier] timeout_sec={task.verifier_timeout_s:g}"
    if reward is None:
        return Grade(0.0, {}, f"task {task.id!r}: reward 0 (fail closed): {why}", status, output[-16_000:],
                     time.monotonic() - start_t, GRADER_UID)
    return Grade(reward, components, "", status, output[-16_000:], time.monotonic() - start_t, GRADER_UID)


def push(task: HarborTask, target: str) -> None:
    """Build the task's image and push it as ``target``; local tags removed after. HarborTaskError on failure."""
    image = build(task)
    try:
        tagged = _docker("tag", image, target)
        if tagged.returncode != 0:
            raise HarborTaskError(f"task {task.id!r}: cannot tag {target!r}: {tagged.stderr.decode()[-500:]}",
                                  task=task.id)
        try:
            pushed = _docker("push", target, timeout=600)
        except subprocess.TimeoutExpired:
            raise HarborTaskError(f"task {task.id!r}: docker push {target} took over 600 s", task=task.id) from None
        if pushed.returncode != 0:
            raise HarborTaskError(f"task {task.id!r}: docker push {target} failed: "
                                  f"{(pushed.stdout + pushed.stderr).decode()[-800:]}", task=task.id)
    finally:
        _docker("rmi", target, timeout=60)
        _docker("rmi", image, timeout=60)


def close(container: Container, remove_image: bool = True) -> None:
    """Remove the agent's container (and the task's image)."""
    _docker("rm", "-f", container.id, timeout=60)
    if remove_image:
        _docker("rmi", "-f", container.image, timeout=60)


def run_oracle(task: HarborTask, scratch: Path | None = None) -> tuple[Grade, BoxResult]:
    """Build, start, copy ``solution/`` in, run solve.sh (cut at [agent] timeout_sec), grade, clean up."""
    container = start(task)
    try:
        copied = _docker("cp", str(task.path / "solution") + "/.", f"{container.id}:/solution")
        if copied.returncode != 0:
            _docker("exec", container.id, "mkdir", "-p", "/solution")
            _docker("cp", str(task.path / "solution") + "/.", f"{container.id}:/solution")
        solved = exec_command(container, "bash /solution/solve.sh", task.agent_timeout_s)
        return grade(container, scratch), solved
    finally:
        close(container)
