"""The swarm provider against a real one-node Swarm: the provider contract, host-mode ports on
loopback, replicas and scaling, hardening, start-up failures, and gc after SIGKILL.

Episodes use raw /ws frames (no client transport needed here); tests/docker drives the same
services with the kernel client.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import owner_id
from openenv.testing.contracts import ProviderContract
from openenv_provider_docker.naming import LABEL_OWNER, LABEL_PROVIDER
from openenv_provider_docker.testing import RUN_LABELS, echo_spec, raw_episode, raw_round_trip, spawn_orphan
from openenv_provider_swarm.provider import SwarmHandle, SwarmProvider

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]


@pytest.fixture
def provider(swarm_client: Any) -> SwarmProvider:
    return SwarmProvider(swarm_client)


def _containers(client: Any, handle: SwarmHandle) -> list[Any]:
    return client.containers.list(all=True, filters={"label": f"com.docker.swarm.service.id={handle.id}"})


def test_provider_contract(provider: SwarmProvider, swarm_client: Any, echo_image: str) -> None:
    def kill(handle: Any) -> None:
        # A Swarm service restarts a killed task, so "the server died" means the service is gone.
        swarm_client.api.remove_service(handle.id)

    def orphan() -> str:
        return spawn_orphan("swarm", "echo", image=echo_image, options={"labels": RUN_LABELS}).id

    ran = ProviderContract(provider, "echo", spec=echo_spec(echo_image), kill=kill, orphan=orphan,
                           round_trip=raw_round_trip).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


def test_host_mode_port_on_loopback_and_labels(provider: SwarmProvider, swarm_client: Any,
                                               echo_image: str) -> None:
    with provider.start(echo_spec(echo_image)) as handle:
        assert handle.base_url.startswith("http://127.0.0.1:")
        reset, step, state = raw_episode(handle.base_url, message="swarm")
        assert reset["data"]["observation"]["echoed_message"] == "ready"
        assert step["data"]["observation"]["echoed_message"] == "swarm"
        assert state["data"]["step_count"] == 1
        spec = swarm_client.api.inspect_service(handle.id)["Spec"]
        (port,) = spec["EndpointSpec"]["Ports"]
        assert port["PublishMode"] == "host"  # never the routing mesh
        assert "PublishedPort" not in port  # the engine picks a free port per task
        assert spec["Labels"][LABEL_OWNER] == owner_id()
        assert spec["Labels"][LABEL_PROVIDER] == "swarm"
        (container,) = _containers(swarm_client, handle)
        bindings = container.attrs["NetworkSettings"]["Ports"]["8000/tcp"]
        assert {b["HostIp"] for b in bindings} == {"127.0.0.1"}, (
            "Swarm published the port beyond loopback: run .ci/docker-setup.sh (dockerd --ip "
            "127.0.0.1 and a loopback-only docker_gwbridge)")
        assert container.labels[LABEL_OWNER] == owner_id()


def test_hardening(provider: SwarmProvider, swarm_client: Any, echo_image: str) -> None:
    with provider.start(echo_spec(echo_image, memory="256m", pids_limit=100)) as handle:
        task = swarm_client.api.inspect_service(handle.id)["Spec"]["TaskTemplate"]
        container_spec = task["ContainerSpec"]
        assert container_spec["CapabilityDrop"] == ["ALL"]
        assert container_spec["ReadOnly"] is True
        assert container_spec["Init"] is True
        assert task["Resources"]["Limits"]["MemoryBytes"] == 256 * 1024**2
        assert task["Resources"]["Limits"]["NanoCPUs"] == 1_000_000_000
        assert task["Resources"]["Limits"]["Pids"] == 100
        (container,) = _containers(swarm_client, handle)
        check = container.exec_run(["/opt/venv/bin/python", "-c",
                                    "import os\n"
                                    "status = dict(l.split(':', 1) for l in open('/proc/self/status'))\n"
                                    "print(os.getuid(), status['CapEff'].strip())\n"
                                    "open('/tmp/ok', 'w')\n"
                                    "try:\n    open('/opt/x', 'w')\nexcept OSError as e:\n    print(e.strerror)\n"])
        assert check.output.decode().split("\n")[:2] == ["10001 0000000000000000", "Read-only file system"]


def test_replicas_and_scaling(provider: SwarmProvider, swarm_client: Any, echo_image: str) -> None:
    handle = provider.start(echo_spec(echo_image, replicas=2))
    try:
        assert len(handle.urls) == 2 and len(set(handle.urls)) == 2
        for url in handle.urls:  # each replica is its own server with its own port
            assert raw_episode(url)[1]["type"] == "observation"
        before = list(handle.urls)
        urls = handle.scale(3)
        assert len(urls) == 3
        assert set(before) <= set(urls)  # the two running replicas stay
        for url in urls:
            assert raw_episode(url)[1]["type"] == "observation"
        assert provider.ps()[0].status == "running 3/3"
        survivors = handle.scale(1)
        assert len(survivors) == 1 and survivors[0] in urls  # scaling down keeps a running one
        assert raw_episode(survivors[0])[1]["type"] == "observation"
        with pytest.raises(ConfigError, match="≥ 1"):
            handle.scale(0)
    finally:
        handle.stop()
    assert not _containers(swarm_client, handle)
    with pytest.raises(RuntimeError, match="was stopped"):
        handle.scale(2)


def test_scaling_keeps_the_running_tasks(provider: SwarmProvider, swarm_client: Any, echo_image: str) -> None:
    with provider.start(echo_spec(echo_image, token="t0ken")) as handle:
        (before,) = _containers(swarm_client, handle)
        handle.scale(2)
        after = {c.id for c in _containers(swarm_client, handle) if c.status == "running"}
        assert before.id in after  # not rolled over: the spec (token included) was kept as is
        for url in handle.urls:
            assert raw_episode(url, token="t0ken")[1]["type"] == "observation"


def test_exit_during_start_up_is_reported_with_the_log_tail(provider: SwarmProvider, echo_image: str) -> None:
    spec = echo_spec(echo_image, env_vars={"OPENENV_MODE": "bogus"}, startup_timeout_s=120)
    spec.mode = ""
    started = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        provider.start(spec)
    message = str(err.value)
    assert "during start-up" in message and "exit code 2" in message
    assert "Invalid mode" in message  # the server's own error, from the service logs
    assert time.monotonic() - started < 60
    assert provider.ps() == []


def test_timeout_removes_the_service(provider: SwarmProvider, echo_image: str) -> None:
    with pytest.raises(TimeoutError, match="replicas ready after"):
        provider.start(echo_spec(echo_image, startup_timeout_s=0.001))
    assert provider.ps() == []


def test_swarm_only_options_are_checked(provider: SwarmProvider, echo_image: str) -> None:
    with pytest.raises(ConfigError, match="Did you mean 'replicas'"):
        provider.start(echo_spec(echo_image, replica=2))


def test_gc_removes_the_services_of_a_killed_owner(provider: SwarmProvider, swarm_client: Any,
                                                    echo_image: str) -> None:
    orphan = spawn_orphan("swarm", "echo", image=echo_image, options={"labels": RUN_LABELS})
    assert raw_episode(orphan.base_url)[1]["type"] == "observation"
    removed = provider.gc()
    assert orphan.id in [h.id for h in removed]
    assert not swarm_client.api.services(filters={"id": orphan.id})
    assert not swarm_client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={orphan.owner}"})
