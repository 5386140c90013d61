"""The docker provider against a real engine: the provider contract, hardening (as configured and
as observed inside the container), secrets, start-up failures, forced stop, and gc after SIGKILL.

The same tests run against Docker Engine and against Podman's Docker-compatible API (CI runs both:
``nox -s podman``); where the two engines report the same hardening differently, the check says so.

Episodes here use raw /ws frames so that this package's tests need no client transport; the
kernel client drives the same containers in tests/docker.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, owner_id
from openenv.testing.contracts import ProviderContract
from openenv_provider_docker import base as base_module
from openenv_provider_docker.naming import LABEL_ENV, LABEL_MANAGED, LABEL_OWNER, LABEL_PROVIDER, owner_network_name
from openenv_provider_docker.networks import BRIDGE_ISOLATION_OPTIONS, is_podman
from openenv_provider_docker.provider import PODMAN_NPROC, DockerHandle, DockerProvider
from openenv_provider_docker.testing import RUN_LABELS, echo_spec, raw_episode, raw_round_trip, spawn_orphan

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]


@pytest.fixture
def provider(docker_client: Any) -> DockerProvider:
    return DockerProvider(docker_client)


def _ulimits(host: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The container's ulimits as (name, soft, hard): Podman names them RLIMIT_NOFILE, Docker nofile."""
    return sorted((u["Name"].lower().removeprefix("rlimit_"), u["Soft"], u["Hard"]) for u in host["Ulimits"])


def assert_drops_every_capability(client: Any, host: dict[str, Any]) -> None:
    """``cap_drop=ALL`` as the engine reports it: Docker echoes ``["ALL"]``; Podman lists each
    capability it dropped (the effective set inside is checked by test_hardening_as_observed_inside)."""
    if is_podman(client):
        assert len(host["CapDrop"]) >= 11 and not host.get("CapAdd"), host["CapDrop"]
    else:
        assert host["CapDrop"] == ["ALL"]


def test_provider_contract(provider: DockerProvider, echo_image: str) -> None:
    def kill(handle: Any) -> None:
        provider.client().containers.get(handle.id).kill()

    def orphan() -> str:
        return spawn_orphan("docker", "echo", image=echo_image, options={"labels": RUN_LABELS}).id

    ran = ProviderContract(provider, "echo", spec=echo_spec(echo_image), kill=kill, orphan=orphan,
                           round_trip=raw_round_trip).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


def test_episode_and_published_port(provider: DockerProvider, echo_image: str) -> None:
    with provider.start(echo_spec(echo_image)) as handle:
        assert handle.base_url.startswith("http://127.0.0.1:")
        reset, step, state = raw_episode(handle.base_url, message="hello")
        assert reset["data"]["observation"]["echoed_message"] == "ready"
        assert step["data"]["observation"]["echoed_message"] == "hello"
        assert step["data"]["reward"] == pytest.approx(0.5)
        assert state["data"]["step_count"] == 1
        attrs = provider.client().api.inspect_container(handle.id)
        bindings = attrs["NetworkSettings"]["Ports"]["8000/tcp"]
        assert {b["HostIp"] for b in bindings} == {"127.0.0.1"}  # never on other interfaces
        labels = attrs["Config"]["Labels"]
        assert labels[LABEL_MANAGED] == "true"
        assert labels[LABEL_PROVIDER] == "docker"
        assert labels[LABEL_OWNER] == owner_id()
        assert labels[LABEL_ENV] == "echo"
        assert [h.id for h in provider.ps()] == [handle.id]
    assert not handle.is_running()


def test_hardening_as_configured(provider: DockerProvider, docker_client: Any, echo_image: str) -> None:
    with provider.start(echo_spec(echo_image)) as handle:
        attrs = docker_client.api.inspect_container(handle.id)
        host = attrs["HostConfig"]
        podman = is_podman(docker_client)
        assert_drops_every_capability(docker_client, host)
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["PidsLimit"] == 256
        assert host["Memory"] == 512 * 1024**2
        assert host["MemorySwap"] == 512 * 1024**2
        assert host["NanoCpus"] == 1_000_000_000
        assert host["ReadonlyRootfs"] is True
        assert "/tmp" in host["Tmpfs"]
        assert host["Init"] is True
        ulimits = _ulimits(host)
        if podman:  # Podman would ask for an nproc a root without CAP_SYS_RESOURCE cannot set
            assert ulimits == [("nofile", 8192, 8192), ("nproc", PODMAN_NPROC, PODMAN_NPROC)]
        else:
            assert ulimits == [("nofile", 8192, 8192)]
        (name,) = attrs["NetworkSettings"]["Networks"]  # Podman's NetworkMode says only "bridge"
        network = docker_client.networks.get(name)
        assert network.attrs["Labels"][LABEL_OWNER] == owner_id()
        if podman:
            # No icc/masquerade switches: a network of its own per container (its `isolate` option
            # is not shown by the compatible API; test_containers_of_one_owner_cannot_reach_each_other
            # checks the isolation by behaviour).
            assert name.startswith(owner_network_name("docker", owner_id()) + "-")
        else:
            assert network.attrs["Options"] == BRIDGE_ISOLATION_OPTIONS


def test_hardening_as_observed_inside(provider: DockerProvider, docker_client: Any, echo_image: str) -> None:
    script = (
        "import os\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
        "print('uid', os.getuid())\n"
        "print('capeff', status['CapEff'].strip())\n"
        "print('nonewprivs', status['NoNewPrivs'].strip())\n"
        "for path in ('/opt/venv/x', '/tmp/x'):\n"
        "    try:\n"
        "        open(path, 'w').write('x'); print('write', path, 'ok')\n"
        "    except OSError as e:\n"
        "        print('write', path, e.strerror)\n"
        "print('pids', open('/sys/fs/cgroup/pids.max').read().strip()"
        " if os.path.exists('/sys/fs/cgroup/pids.max') else 'unknown')\n"
    )
    with provider.start(echo_spec(echo_image)) as handle:
        container = docker_client.containers.get(handle.id)
        result = container.exec_run(["/opt/venv/bin/python", "-c", script])
        out = result.output.decode()
        assert result.exit_code == 0, out
        assert "uid 10001" in out
        assert "capeff 0000000000000000" in out  # no capability at all
        assert "nonewprivs 1" in out
        assert "write /opt/venv/x Read-only file system" in out
        assert "write /tmp/x ok" in out  # the env still has a writable /tmp


def test_containers_of_one_owner_cannot_reach_each_other(provider: DockerProvider, docker_client: Any,
                                                         echo_image: str) -> None:
    with provider.start(echo_spec(echo_image)) as first, provider.start(echo_spec(echo_image)) as second:
        attrs = docker_client.api.inspect_container(second.id)
        (net,) = attrs["NetworkSettings"]["Networks"].values()
        target = net["IPAddress"]
        probe = ("import socket\n"
                 f"s = socket.socket(); s.settimeout(2)\n"
                 f"print('reached' if s.connect_ex(('{target}', 8000)) == 0 else 'blocked')\n")
        out = docker_client.containers.get(first.id).exec_run(["/opt/venv/bin/python", "-c", probe])
        assert out.output.decode().strip() == "blocked"
        # ...while the host still reaches both through their published ports.
        assert raw_episode(first.base_url)[1]["type"] == "observation"
        assert raw_episode(second.base_url)[1]["type"] == "observation"


def test_options_change_the_limits(provider: DockerProvider, docker_client: Any, echo_image: str) -> None:
    spec = echo_spec(echo_image, memory="256m", cpus=0.5, pids_limit=64, read_only=False, network="bridge",
                     nproc=4096)
    with provider.start(spec) as handle:
        host = docker_client.api.inspect_container(handle.id)["HostConfig"]
        assert (host["Memory"], host["NanoCpus"], host["PidsLimit"]) == (256 * 1024**2, 500_000_000, 64)
        assert _ulimits(host) == [("nofile", 8192, 8192), ("nproc", 4096, 4096)]
        assert host["ReadonlyRootfs"] is False
        assert host["NetworkMode"] == "bridge"
        assert_drops_every_capability(docker_client, host)  # the rest of the hardening stays on


def test_secrets_travel_only_in_the_environment(provider: DockerProvider, docker_client: Any,
                                                echo_image: str) -> None:
    secret = "s3cret-token-value"
    spec = echo_spec(echo_image, token=secret, env_vars={"API_KEY": "k3y-value"})
    with provider.start(spec) as handle:
        attrs = docker_client.api.inspect_container(handle.id)
        argv = json.dumps([attrs["Path"], attrs["Args"], attrs["Config"]["Cmd"]])
        assert secret not in argv and "k3y-value" not in argv
        assert f"OPENENV_TOKEN={secret}" in attrs["Config"]["Env"]
        assert "API_KEY=k3y-value" in attrs["Config"]["Env"]
        assert secret not in handle.logs(200)
        # The server really requires it: without the token the upgrade is refused.
        from websockets.exceptions import InvalidStatus

        with pytest.raises(InvalidStatus):
            raw_episode(handle.base_url)
        assert raw_episode(handle.base_url, token=secret)[1]["type"] == "observation"


def test_exit_during_start_up_is_reported_at_once_with_the_log_tail(provider: DockerProvider,
                                                                     echo_image: str) -> None:
    spec = echo_spec(echo_image, env_vars={"OPENENV_MODE": "bogus"}, startup_timeout_s=120)
    spec.mode = ""  # let the bogus value from env_vars reach the server
    started = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        provider.start(spec)
    message = str(err.value)
    assert "exited with code" in message and "during start-up" in message
    assert "Invalid mode" in message  # the server's own error, from the log tail
    assert time.monotonic() - started < 60  # reported when it died, not at the 120 s timeout


def test_timeout_removes_the_container(provider: DockerProvider, echo_image: str) -> None:
    with pytest.raises(TimeoutError) as err:
        provider.start(echo_spec(echo_image, startup_timeout_s=0.001))
    assert "not ready after" in str(err.value)


def test_interrupted_start_leaves_nothing(provider: DockerProvider, echo_image: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(self: DockerHandle, timeout_s: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(DockerHandle, "wait_ready", interrupted)
    with pytest.raises(KeyboardInterrupt):
        provider.start(echo_spec(echo_image))


def test_missing_image_names_the_build_command(provider: DockerProvider) -> None:
    with pytest.raises(ConfigError) as err:
        provider.start(LaunchSpec(env="no-such-env-xyz", options={"labels": RUN_LABELS}))
    assert "openenv-no-such-env-xyz:latest" in str(err.value)
    assert "openenv build" in str(err.value)


def test_stop_is_forced_after_the_timeout(provider: DockerProvider, docker_client: Any, echo_image: str) -> None:
    handle = provider.start(echo_spec(echo_image))
    container = docker_client.containers.get(handle.id)
    # Freeze the server: SIGTERM then waits in the queue, so only the forced kill can end it.
    # (argv elements are compared exactly: this script's own source mentions 'serve' too.)
    freeze = ("import os, signal\n"
              "for pid in os.listdir('/proc'):\n"
              "    if pid.isdigit() and b'serve' in open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0'):\n"
              "        os.kill(int(pid), signal.SIGSTOP)\n")
    assert container.exec_run(["/opt/venv/bin/python", "-c", freeze]).exit_code == 0
    handle.stop(timeout_s=1)
    assert not handle.is_running()
    assert handle.id not in [c.id for c in docker_client.containers.list(all=True)]
    handle.stop()  # idempotent


def test_gc_removes_the_containers_of_a_killed_owner(provider: DockerProvider, docker_client: Any,
                                                      echo_image: str) -> None:
    orphan = spawn_orphan("docker", "echo", image=echo_image, options={"labels": RUN_LABELS})
    assert raw_episode(orphan.base_url)[1]["type"] == "observation"  # it outlived its owner
    mine = provider.start(echo_spec(echo_image))  # a live owner's container must survive gc
    try:
        removed = provider.gc()
        assert orphan.id in [h.id for h in removed]
        assert mine.id not in [h.id for h in removed]
        assert mine.is_running()
        assert orphan.id not in [c.id for c in docker_client.containers.list(all=True)]
        # The dead owner's network went with it.
        assert not [n for n in docker_client.networks.list(filters={"label": f"{LABEL_OWNER}={orphan.owner}"})]
    finally:
        mine.stop()


def test_exit_hook_stops_live_handles(provider: DockerProvider, docker_client: Any, echo_image: str) -> None:
    handle = provider.start(echo_spec(echo_image))
    base_module.stop_live_handles()  # what atexit runs when the process ends normally
    assert not handle.is_running()
    assert handle.id not in [c.id for c in docker_client.containers.list(all=True)]


def test_bench_measures_start_to_ready(provider: DockerProvider, echo_image: str) -> None:
    from openenv_provider_docker.bench import measure_start_to_ready, summarize

    timings = measure_start_to_ready(2, env="echo", image=echo_image, provider=provider,
                                     options={"labels": RUN_LABELS}, warmup=0)
    assert len(timings) == 2 and all(t > 0 for t in timings)
    assert summarize(timings)["n"] == 2
