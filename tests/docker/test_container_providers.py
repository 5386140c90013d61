"""The docker and swarm providers with everything installed: the provider contract with the
kernel's client, typed episodes, several sessions per container, the CLI (``openenv run``,
``openenv providers ps/gc``), and clients killed with SIGKILL whose servers ``gc`` removes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from openenv.errors import CapacityError
from openenv.interfaces import owner_id
from openenv.testing.contracts import ProviderContract
from openenv_env_echo.client import EchoEnvClient
from openenv_env_echo.models import EchoAction
from openenv_provider_docker.naming import LABEL_MANAGED, LABEL_OWNER, LABEL_PROVIDER
from openenv_provider_docker.testing import RUN_LABELS, echo_spec, spawn_orphan

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers")]


def _openenv(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True,
                          timeout=timeout)


def _managed_labels(client: Any, provider_name: str) -> dict[str, dict[str, str]]:
    flt = {"label": [f"{LABEL_MANAGED}=true", f"{LABEL_PROVIDER}={provider_name}"]}
    if provider_name == "swarm":
        return {s["ID"]: s["Spec"].get("Labels") or {} for s in client.api.services(filters=flt)}
    return {c.id: c.labels for c in client.containers.list(all=True, filters=flt)}


def test_contract_with_the_kernel_client(provider: Any, provider_name: str, docker_client: Any,
                                         echo_image: str) -> None:
    def kill(handle: Any) -> None:
        if provider_name == "swarm":
            docker_client.api.remove_service(handle.id)  # Swarm would restart a killed task
        else:
            docker_client.containers.get(handle.id).kill()

    def orphan() -> str:
        found = spawn_orphan(provider_name, "echo", image=echo_image, options={"labels": RUN_LABELS},
                             client=True)
        assert found.steps == 1  # the killed process was a real client mid-episode
        return found.id

    ran = ProviderContract(provider, "echo", spec=echo_spec(echo_image), kill=kill, orphan=orphan).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


async def test_typed_episode_through_from_provider(provider_name: str, docker_client: Any,
                                                   echo_image: str) -> None:
    client = await EchoEnvClient.from_provider("echo", provider_name, launch=echo_spec(echo_image))
    try:
        assert client.base_url.startswith("http://127.0.0.1:")
        first = await client.reset()
        assert first.observation.echoed_message == "ready"
        total = 0.0
        for word in ("a", "bb", "ccc"):
            result = await client.step(EchoAction(message=word))
            assert result.observation.echoed_message == word
            total += result.reward or 0.0
        assert total == pytest.approx(0.6)
        assert (await client.state()).step_count == 3
    finally:
        await client.close()
    from openenv.plugins import get_plugin_manager

    prov = get_plugin_manager().catalog.providers.load(provider_name)(docker_client)
    assert prov.ps() == []  # closing the client stopped and removed its server


def test_several_sessions_in_one_container(provider: Any, echo_image: str) -> None:
    spec = echo_spec(echo_image)
    spec.max_sessions = 3
    with provider.start(spec) as handle:
        clients = [EchoEnvClient(handle.base_url).sync() for _ in range(3)]
        try:
            for i, client in enumerate(clients):
                client.reset()
                assert client.step(EchoAction(message="x" * (i + 1))).observation.message_length == i + 1
            extra = EchoEnvClient(handle.base_url).sync()
            with pytest.raises(CapacityError) as err:
                extra.reset()
            assert err.value.max_sessions == 3  # the limit reached the server in the container
            extra.close()
        finally:
            for client in clients:
                client.close()


def test_openenv_run_with_the_provider(provider_name: str, docker_client: Any, echo_image: str) -> None:
    cmd = [sys.executable, "-m", "openenv", "run", "echo", "--provider", provider_name, "--episodes", "2",
           "--max-steps", "3", "--seed", "1", "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["schema"] == "openenv.run/1"
    assert summary["episodes"] == 2
    # The command stopped its server: nothing it owns (owner label host:pid:start) is left. Other
    # tests' resources may come and go meanwhile (xdist), so only this process's are counted.
    owner = f"{owner_id().split(':')[0]}:{proc.pid}:"
    left = {r for r, labels in _managed_labels(docker_client, provider_name).items()
            if labels.get(LABEL_OWNER, "").startswith(owner)}
    assert left == set(), f"left by `openenv run` (pid {proc.pid}): {left}; its stderr:\n{stderr}"


def test_providers_ps_and_gc_commands(provider: Any, provider_name: str, echo_image: str) -> None:
    orphan = spawn_orphan(provider_name, "echo", image=echo_image, options={"labels": RUN_LABELS},
                          client=True)
    with provider.start(echo_spec(echo_image)) as mine:
        ps = _openenv("providers", "ps", "--provider", provider_name, "--all-owners", "--json")
        assert ps.returncode == 0, ps.stderr
        listed = {h["id"]: h for h in json.loads(ps.stdout)["handles"]}
        assert {orphan.id, mine.id} <= set(listed)
        assert listed[mine.id]["owner"] == owner_id()
        assert listed[orphan.id]["owner"] == orphan.owner

        gc = _openenv("providers", "gc", "--provider", provider_name, "--json")
        assert gc.returncode == 0, gc.stderr
        removed = [h["id"] for h in json.loads(gc.stdout)["handles"]]
        # Gone is what counts: the engine can finish the orphan's removal between gc's listing and its
        # own remove call (seen once in CI: the container killed and destroyed in that second, gc's
        # list empty), and then gc rightly does not claim it.
        assert orphan.id in removed or orphan.id not in {h.id for h in provider.ps(all_owners=True)}, removed
        assert mine.id not in removed  # its owner (this process) is alive
        assert mine.is_running()
    assert orphan.id not in {h.id for h in provider.ps(all_owners=True)}
