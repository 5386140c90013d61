"""The coding and shell envs in the docker provider's hardened containers, driven by the kernel's
client: an episode of each, the boundary ``/metadata`` states, and hostile code checking from
inside that the boundary holds (no network, no writes outside its directory, no secrets, killed on
timeout, fork bombs bounded, no signalling the server, no reaching another session's tree).

Each hostile snippet is also run *unsandboxed* in the same container (``docker exec`` as the same
uid, or as root where the point is that the secret is there to find), so every assertion could
fail. The images are built once and reused while their inputs do not change (``openenv build``'s
input hash); ``test_images_are_built_once`` reports how long that took.
"""

from __future__ import annotations

import io
import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from openenv.client import GenericEnvClient
from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_docker.provider import DockerHandle, DockerProvider
from openenv_provider_docker.testing import (
    RUN_LABELS,
    base_image_for_tests,
    git_base_image_for_tests,
    skip_unless_required,
)

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "tok-" + secrets.token_hex(8)
SECRET = "secret-" + secrets.token_hex(8)
SLOT_UIDS = range(61000, 61064)
BUILDS: dict[str, tuple[bool, float]] = {}
# Finds the server process from inside (there is no PID namespace per execution, by design); PID 1
# is the container's init, whose command line ends with the server's.
FIND_SERVER = ("import os\n"
               "def server_pid():\n"
               "    for pid in filter(str.isdigit, os.listdir('/proc')):\n"
               "        try:\n"
               "            if pid != '1' and b'openenv\\x00serve' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
               "                return int(pid)\n"
               "        except OSError:\n"
               "            pass\n")


def _build(client: Any, env: str, base: str | None, why: str) -> str:
    from rich.console import Console

    from openenv_provider_docker.build import build_image

    if base is None:
        skip_unless_required(why)
    result = build_image(ROOT / "envs" / env, base_image=base, client=client, console=Console(file=io.StringIO()))
    BUILDS[env] = (result.built, result.seconds)
    return result.tag


@pytest.fixture(scope="module")
def coding_image(docker_client: Any) -> str:
    return _build(docker_client, "coding", base_image_for_tests(docker_client),
                  "no base image to build on: run .ci/docker-setup.sh (makes openenv-base:bookworm offline)")


@pytest.fixture(scope="module")
def shell_image(docker_client: Any) -> str:
    return _build(docker_client, "shell", git_base_image_for_tests(docker_client),
                  "no base image with git: run .ci/docker-setup.sh (makes openenv-base:bookworm-git) or set "
                  "OPENENV_GIT_BASE_IMAGE")


def _spec(env: str, image: str, **options: Any) -> LaunchSpec:
    return LaunchSpec(env=env, image=image, token=TOKEN, env_vars={"OPENENV_TEST_SECRET": SECRET}, max_sessions=4,
                      startup_timeout_s=120, options={"labels": dict(RUN_LABELS), **options})


@contextmanager
def _serve(client: Any, spec: LaunchSpec) -> Iterator[DockerHandle]:
    handle = DockerProvider(client).start(spec)
    try:
        yield handle
    finally:
        handle.stop(timeout_s=5)
    assert not handle.is_running()


@pytest.fixture(scope="module")
def coding(docker_client: Any, coding_image: str) -> Iterator[DockerHandle]:
    with _serve(docker_client, _spec("coding", coding_image)) as handle:
        yield handle


@pytest.fixture(scope="module")
def shell(docker_client: Any, shell_image: str) -> Iterator[DockerHandle]:
    with _serve(docker_client, _spec("shell", shell_image)) as handle:
        yield handle


def _metadata(handle: DockerHandle) -> dict[str, Any]:
    """The sandbox's /metadata. Its self-check is one execution, which a host busy with other tests can
    time out: /metadata then says UNVERIFIED and the server runs it again on the next request."""
    for _ in range(3):
        response = httpx.get(f"{handle.base_url}/metadata", headers={"Authorization": f"Bearer {TOKEN}"},
                             timeout=30)
        response.raise_for_status()
        md = dict(response.json()["sandbox"])
        if "error" not in md["self_check"]:
            return md
        assert any(line.startswith("UNVERIFIED") for line in md["not_enforced"]), md
    raise AssertionError(f"the sandbox's self-check failed three times: {md['self_check']['error']}")


def _runtime(client: Any, handle: DockerHandle) -> str:
    return str(client.api.inspect_container(handle.id)["HostConfig"].get("Runtime") or "runc")


def _unsandboxed(client: Any, handle: DockerHandle, code: str, user: str = "61000:61000") -> str:
    """Run ``code`` in the same container without the sandbox (``docker exec``), as ``user``."""
    _, output = client.containers.get(handle.id).exec_run(["/usr/bin/python3", "-c", code], user=user)
    return str(output.decode("utf-8", "replace"))


async def _run(env: GenericEnvClient, code: str) -> dict[str, Any]:
    return dict((await env.step({"code": code})).observation)


def _slot_processes(client: Any, handle: DockerHandle) -> str:
    code = ("import os\n"
            "left = []\n"
            "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        uid = int(open(f'/proc/{pid}/status').read().split('Uid:')[1].split()[0])\n"
            "    except (OSError, IndexError):\n"
            "        continue\n"
            f"    if uid in range({SLOT_UIDS.start}, {SLOT_UIDS.stop}):\n"
            "        left.append(pid)\n"
            "print(left)\n")
    return _unsandboxed(client, handle, code, user="0:0").strip()


# -- the boundary as stated -------------------------------------------------------------------------


@pytest.mark.parametrize("env", ["coding", "shell"])
def test_metadata_states_the_boundary(env: str, request: pytest.FixtureRequest, docker_client: Any) -> None:
    handle: DockerHandle = request.getfixturevalue(env)
    host = docker_client.api.inspect_container(handle.id)["HostConfig"]
    config = docker_client.api.inspect_container(handle.id)["Config"]
    # As configured: root holding only the sandbox's three capabilities, everything else hardened.
    assert config["User"] == "0:0" and host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == ["CHOWN", "SETGID", "SETUID"]
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["ReadonlyRootfs"] is True
    gvisor = _runtime(docker_client, handle) == "runsc"
    # gVisor's own host threads count against the pids cgroup: the provider leaves room for them.
    assert host["PidsLimit"] == (4096 if gvisor else 256)
    md = _metadata(handle)
    # As observed from inside, and stated.
    assert md["privileges"].startswith("dropped to uid/gid 61000..61063")
    assert md["network"].startswith("none")
    assert md["syscall_filter"].startswith("seccomp: socket() of any family but AF_UNIX")
    assert md["container"] == "docker" and md["gvisor"] is gvisor
    assert md["server_process"]["uid"] == 0
    assert sorted(md["server_process"]["capabilities"]) == ["CHOWN", "SETGID", "SETUID"]
    if not gvisor:  # gVisor's /proc does not report these
        assert md["server_process"]["no_new_privs"] is True
        assert md["server_process"]["seccomp"] == "filter"  # Docker's profile, around ours
    outermost = "gVisor sandbox (docker)" if gvisor else "docker container (shared host kernel)"
    assert md["outermost_boundary"] == outermost
    # The read-only root leaves only the engine's tmpfs mounts writable by everyone.
    assert set(md["world_writable_dirs"]) <= {"/tmp", "/dev/shm", "/dev/mqueue"}
    assert any(line.startswith("its own uid per concurrent slot") for line in md["enforced"])
    assert not any("server's own uid" in line for line in md["not_enforced"])
    assert md["self_check"]["can_signal_server"] is False and md["self_check"]["inet_socket"] is False
    if not gvisor:  # the strongest claims, where they hold (gVisor: see the secrets test)
        assert md["self_check"]["environ_readable"] == []
        assert any(line.startswith("the environment of the server and of PID 1") for line in md["enforced"])
    assert any(line.startswith("the host kernel is shared") for line in md["not_enforced"]) is not gvisor


# -- episodes ---------------------------------------------------------------------------------------


async def test_a_coding_episode_write_run_fix_submit(coding: DockerHandle) -> None:
    async with GenericEnvClient(coding.base_url, token=TOKEN) as env:
        first = await env.reset(task_id="add")
        assert first.observation["task_id"] == "add"
        wrote = await _run(env, "def add(a, b):\n    return a - b\nassert add(2, 3) == 5\n")
        assert wrote["exit_code"] == 1 and "AssertionError" in wrote["stderr"]
        fixed = await _run(env, "def add(a, b):\n    return a + b\nprint(add(2, 3))\n")
        assert fixed["exit_code"] == 0 and fixed["stdout"] == "5\n"
        graded = await env.step({"code": "def add(a, b):\n    return a + b\n", "submit": True})
        assert graded.done and graded.reward == 1.0
        assert graded.observation["tests_passed"] == graded.observation["tests_total"] == 4


async def test_a_shell_task_is_solved(shell: DockerHandle) -> None:
    async with GenericEnvClient(shell.base_url, token=TOKEN) as env:
        reset = await env.reset(task_id="fix-add")
        assert "calc.py" in (await env.step({"command": "git ls-files"})).observation["stdout"]
        failing = (await env.step({"command": "python3 test_calc.py"})).observation
        assert failing["exit_code"] != 0 and not failing["solved"]
        solved = await env.step({"command": "sed -i 's/a - b/a + b/' calc.py && git diff --stat"})
        assert solved.done and solved.reward == 1.0 and solved.observation["solved"]
        assert reset.observation["cwd"].startswith("/tmp/openenv-sandbox-")


# -- the boundary as it holds -----------------------------------------------------------------------


async def test_no_network_not_even_the_servers_own_port(coding: DockerHandle, docker_client: Any) -> None:
    gateway = next(iter(docker_client.api.inspect_container(coding.id)["NetworkSettings"]["Networks"].values()))[
        "Gateway"]
    code = ("import socket\n"
            f"for host, port in (('127.0.0.1', 8000), ('{gateway}', 80), ('1.1.1.1', 53)):\n"
            "    try:\n"
            "        socket.create_connection((host, port), timeout=2).close(); print('connected', host)\n"
            "    except OSError as exc:\n"
            "        print('refused', host, type(exc).__name__)\n")
    assert "connected 127.0.0.1" in _unsandboxed(docker_client, coding, code)  # the server listens there
    async with GenericEnvClient(coding.base_url, token=TOKEN) as env:
        await env.reset(task_id="add")
        out = (await _run(env, code))["stdout"]
    assert out.splitlines() == [f"refused {h} PermissionError" for h in ("127.0.0.1", gateway, "1.1.1.1")]


async def test_no_writes_outside_its_directory(coding: DockerHandle, docker_client: Any) -> None:
    md = _metadata(coding)
    code = ("import os\n"
            "here = os.getcwd()\n"
            "targets = ['/x', '/opt/venv/x', '/etc/x', os.path.dirname(here) + '/x', '/root/x']\n"
            f"targets += [d + '/openenv-probe' for d in {md['world_writable_dirs']!r}]\n"
            "for path in targets:\n"
            "    try:\n"
            "        open(path, 'w').close(); os.remove(path); print('wrote', path)\n"
            "    except OSError as exc:\n"
            "        print('refused', path, type(exc).__name__)\n"
            "open('mine.txt', 'w').write('ok'); print('own', open('mine.txt').read())\n")
    # Without the sandbox, as root in this container, the sandbox's root (other sessions' trees) is writable.
    sandbox_root = _unsandboxed(docker_client, coding, "import glob; print(glob.glob('/tmp/openenv-sandbox-*')[0])",
                                user="0:0").strip()
    plain = _unsandboxed(docker_client, coding, code.replace("here = os.getcwd()", f"here = '{sandbox_root}/r'"),
                         user="0:0")
    assert f"wrote {sandbox_root}/x" in plain
    async with GenericEnvClient(coding.base_url, token=TOKEN) as env:
        await env.reset(task_id="add")
        lines = (await _run(env, code))["stdout"].splitlines()
    assert lines[-1] == "own ok"
    wrote = {line.split()[1] for line in lines if line.startswith("wrote")}
    # Only what /metadata admits to (world-writable directories) may be written outside the directory.
    assert wrote <= {d + "/openenv-probe" for d in md["world_writable_dirs"]}, lines
    assert all(line.startswith("refused") for line in lines[:5]), lines


async def test_the_servers_secrets_are_out_of_reach(coding: DockerHandle, docker_client: Any) -> None:
    """The environment of the server and of the container's init is unreadable, exactly as
    ``/metadata`` states. Under gVisor (Debian's runsc 20221219, measured) ``/proc/<pid>/environ``
    of other uids *is* readable: there ``/metadata`` must say so, and this checks that it does."""
    claimed = _metadata(coding)["self_check"]["environ_readable"]
    if _runtime(docker_client, coding) != "runsc":
        assert claimed == []
    code = FIND_SERVER + (
        "print(sorted(os.environ))\n"
        "for pid in (1, server_pid()):\n"
        "    try:\n"
        f"        data = open(f'/proc/{{pid}}/environ', 'rb').read(); print('read', pid, b'{SECRET}' in data)\n"
        "    except OSError as exc:\n"
        "        print('refused', pid, type(exc).__name__)\n")
    # The secret and the token are there to be found: the container's init and server hold them.
    assert "read 1 True" in _unsandboxed(docker_client, coding, code, user="0:0")
    async with GenericEnvClient(coding.base_url, token=TOKEN) as env:
        await env.reset(task_id="add")
        out = await _run(env, code)
    lines = out["stdout"].splitlines()
    assert lines[0] == str(sorted(["HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "TMPDIR"]))
    read = [line for line in lines[1:] if line.startswith("read")]
    assert len(read) == len(claimed) and (claimed == [] or 1 in claimed), (lines, claimed)
    if not claimed:
        assert SECRET not in out["stdout"] and TOKEN not in out["stdout"]


async def test_timeouts_fork_bombs_and_kills_are_contained(coding: DockerHandle, docker_client: Any) -> None:
    bomb = ("import os, time\n"
            "while True:\n"
            "    try:\n"
            "        os.fork()\n"
            "    except OSError:\n"
            "        time.sleep(0.01)\n")
    kill = FIND_SERVER + ("import signal\n"
                          "for pid in (1, server_pid(), os.getppid()):\n"
                          "    try:\n"
                          "        os.kill(pid, signal.SIGKILL); print('killed', pid)\n"
                          "    except PermissionError:\n"
                          "        print('refused')\n")
    async with GenericEnvClient(coding.base_url, token=TOKEN) as env, \
            GenericEnvClient(coding.base_url, token=TOKEN) as bystander:
        await env.reset(task_id="add")
        await bystander.reset(task_id="add")
        start = time.monotonic()
        loop = await _run(env, "while True:\n    pass\n")
        assert loop["timed_out"] or loop["killed_by"] == "cpu_time", loop
        assert loop["killed_by"] in ("wall_time", "cpu_time") and time.monotonic() - start < 15
        forked = await _run(env, bomb)
        # Killed at the wall-clock limit, or at the CPU limit first where failing forks cost CPU (gVisor).
        assert forked["killed_by"] in ("wall_time", "cpu_time"), forked
        assert _slot_processes(docker_client, coding) == "[]"  # the whole bomb is gone
        assert (await _run(env, kill))["stdout"] == "refused\nrefused\nrefused\n"
        assert (await _run(bystander, "print(6 * 7)"))["stdout"] == "42\n"  # another session never noticed
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{coding.base_url}/health", timeout=10)).status_code == 200


async def test_a_session_cannot_reach_another_sessions_tree(shell: DockerHandle, docker_client: Any) -> None:
    async with GenericEnvClient(shell.base_url, token=TOKEN) as mine, \
            GenericEnvClient(shell.base_url, token=TOKEN) as theirs:
        tree = (await mine.reset(task_id="make-file")).observation["cwd"]
        await theirs.reset(task_id="make-file")
        await mine.step({"command": f"echo {SECRET} > private.txt"})
        probe = f"cat {tree}/private.txt; ls {tree}; ls $(dirname $PWD); rm -rf {tree}; echo rc=$?"
        seen = (await theirs.step({"command": probe})).observation
        assert SECRET not in seen["stdout"] and "Permission denied" in seen["stderr"], seen
        kept = (await mine.step({"command": "cat private.txt"})).observation
        assert kept["stdout"].strip() == SECRET
        # A background job does not outlive its command.
        await theirs.step({"command": "(setsid sleep 600 &) ; nohup sleep 600 >/dev/null 2>&1 & echo started"})
        assert _slot_processes(docker_client, shell) == "[]"


# -- the other cases, stated truthfully -------------------------------------------------------------


async def test_without_drop_privileges_metadata_says_what_is_exposed(docker_client: Any, coding_image: str) -> None:
    """An explicit ``options['user']`` keeps the image's unprivileged user and adds no capability:
    executions share the server's uid, and ``/metadata`` says what that exposes (the container's
    init, which holds the container's environment) and what still holds."""
    with _serve(docker_client, _spec("coding", coding_image, user="10001:10001")) as handle:
        md = _metadata(handle)
        assert md["privileges"].startswith("NOT dropped")
        assert md["server_process"]["capabilities"] == [] and md["server_process"]["dumpable"] is False
        assert md["network"].startswith("none: socket() limited to AF_UNIX")
        exposed = next(line for line in md["not_enforced"] if line.startswith("other processes of the server's uid"))
        assert "1 (docker-init)" in exposed
        assert any("can signal (kill) the server" in line for line in md["not_enforced"])
        code = FIND_SERVER + (
            "for pid in (1, server_pid()):\n"
            "    try:\n"
            f"        print(pid == 1, b'{SECRET}' in open(f'/proc/{{pid}}/environ', 'rb').read())\n"
            "    except OSError as exc:\n"
            "        print(pid == 1, type(exc).__name__)\n"
            "import socket\n"
            "try:\n"
            "    socket.socket()\n"
            "except PermissionError:\n"
            "    print('offline')\n")
        async with GenericEnvClient(handle.base_url, token=TOKEN) as env:
            await env.reset(task_id="add")
            lines = (await _run(env, code))["stdout"].splitlines()
        # Exactly as stated: init's environment is readable, the server's only where the self-check
        # says so (gVisor), and there is no network.
        server_readable = "True" if len(md["self_check"]["environ_readable"]) == 2 else "PermissionError"
        assert lines == ["True True", f"False {server_readable}", "offline"], (lines, md["self_check"])
        if _runtime(docker_client, handle) != "runsc":
            assert md["self_check"]["environ_readable"] == [1]  # the non-dumpable server is out of reach


def test_a_runtime_the_engine_lacks_is_refused_before_anything_starts(docker_client: Any, coding_image: str) -> None:
    runtimes = (docker_client.info().get("Runtimes") or {}).keys()
    missing = "runsc" if "runsc" not in runtimes else "openenv-no-such-runtime"
    before = {c.id for c in docker_client.containers.list(all=True)}
    with pytest.raises(ConfigError, match=f"'{missing}': this engine has no such runtime"):
        DockerProvider(docker_client).start(_spec("coding", coding_image, runtime=missing))
    assert {c.id for c in docker_client.containers.list(all=True)} <= before


def test_images_are_built_once(coding_image: str, shell_image: str, record_property: Any) -> None:
    """Reports the build times of this run (0 s-ish when the images were up to date)."""
    for env, (built, seconds) in BUILDS.items():
        record_property(f"{env}_image", json.dumps({"built": built, "seconds": round(seconds, 1)}))
        print(f"{env} image: {'built' if built else 'up to date'} in {seconds:.1f} s")
    assert set(BUILDS) == {"coding", "shell"}
