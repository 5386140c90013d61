"""The kubernetes provider on a real API server and node (``.ci/k8s-setup.sh``): contract, hardening,
faults, ``openenv run``. Every object lives in the session's own namespace (``conftest.kube``)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing.contracts import ProviderContract
from openenv_provider_kubernetes.cluster import AccessDenied, KubernetesUnavailable, QuotaExceeded
from openenv_provider_kubernetes.pods import PodFailed
from openenv_provider_kubernetes.provider import KubernetesProvider

# The node runs Pods on the local Docker engine; the echo image is built with `openenv build`.
_docker_testing = pytest.importorskip("openenv_provider_docker.testing",
                                      reason="needs openenvkit-provider-docker (openenv build) installed too")
raw_episode, spawn_orphan = _docker_testing.raw_episode, _docker_testing.spawn_orphan

# The module-level import above skips this file where the docker provider is missing (nox -s packages);
# the marker selects it in `nox -s integration`.
pytestmark = [pytest.mark.kubernetes, pytest.mark.slow, pytest.mark.requires_plugins("provider-docker")]


def _containers(docker_client: Any, pod: str) -> list[Any]:
    return list(docker_client.containers.list(all=True, filters={"label": [
        f"io.kubernetes.pod.name={pod}", "io.kubernetes.container.name=server"]}))


def test_provider_contract_on_a_real_cluster(provider: KubernetesProvider, kube: Any, echo_image: str,
                                             docker_client: Any) -> None:
    def kill(handle: ProviderHandle) -> None:
        (container,) = _containers(docker_client, handle.id)
        container.kill()

    def orphan() -> str:
        return spawn_orphan("kubernetes", "echo", options={"namespace": kube.namespace}).id

    contract = ProviderContract(provider, "echo", spec=LaunchSpec(env="echo", startup_timeout_s=120),
                                kill=kill, orphan=orphan)
    assert contract.run() == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert kube.wait_no_leftovers() == []


def test_pod_is_hardened_where_it_runs(provider: KubernetesProvider, kube: Any, echo_image: str,
                                       docker_client: Any) -> None:
    handle = provider.start(LaunchSpec(env="echo", token="tok-123", startup_timeout_s=120))
    try:
        pod = kube.core.read_namespaced_pod(handle.id, kube.namespace)
        assert pod.spec.automount_service_account_token is False
        assert pod.spec.security_context.run_as_non_root is True
        sc = pod.spec.containers[0].security_context
        assert (sc.allow_privilege_escalation, sc.read_only_root_filesystem, sc.capabilities.drop) == \
            (False, True, ["ALL"])
        service = kube.core.read_namespaced_service(handle.id, kube.namespace)
        assert service.spec.selector == {"openenv.org/instance": handle.id}
        # What the node made of it: the container as the Docker engine runs it.
        (container,) = _containers(docker_client, handle.id)
        host = container.attrs["HostConfig"]
        assert host["ReadonlyRootfs"] is True
        assert "ALL" in (host["CapDrop"] or [])
        assert any(o.startswith("no-new-privileges") for o in host["SecurityOpt"] or [])
        assert container.attrs["Config"]["User"].split(":")[0] == "10001"
        assert not any("/var/run/secrets/kubernetes.io" in (m.get("Destination") or "")
                       for m in container.attrs["Mounts"])
        replies = raw_episode(handle.base_url, token="tok-123")  # through the port-forward
        assert [r["type"] for r in replies] == ["observation", "observation", "state"]
        assert handle.forward is not None and handle.forward.connections >= 1
    finally:
        handle.stop()
    assert kube.wait_no_leftovers() == []


def test_missing_image_fails_fast_with_events_and_is_deleted(provider: KubernetesProvider, kube: Any) -> None:
    spec = LaunchSpec(env="echo", image="openenv-no-such-image:0", startup_timeout_s=120,
                      options={"image_pull_policy": "Never"})
    started = time.monotonic()
    with pytest.raises(PodFailed) as info:
        provider.start(spec)
    assert time.monotonic() - started < 60, "a missing image must fail at once, not at the timeout"
    text = str(info.value)
    assert "ErrImageNeverPull" in text and "Events of the Pod" in text, text
    assert kube.wait_no_leftovers() == []


def test_crashing_server_fails_with_its_log_tail(provider: KubernetesProvider, kube: Any, echo_image: str) -> None:
    spec = LaunchSpec(env="echo", startup_timeout_s=120, options={
        "args": ["python", "-c", "import sys; print('crash-marker-17'); sys.exit(3)"]})
    with pytest.raises(PodFailed) as info:
        provider.start(spec)
    text = str(info.value)
    assert "exit code 3" in text and "crash-marker-17" in text, text
    assert kube.wait_no_leftovers() == []


def test_forbidden_names_the_missing_rbac_rule(kube: Any, skip_or_fail: Callable[[str], NoReturn]) -> None:
    limited = Path(kube.kubeconfig).with_name("kubeconfig-limited")
    if not limited.is_file():
        skip_or_fail(f"no {limited} (written by .ci/k8s-setup.sh)")
    prov = KubernetesProvider(kubeconfig=str(limited), namespace=kube.namespace)
    with pytest.raises(AccessDenied) as info:
        prov.start(LaunchSpec(env="echo", startup_timeout_s=30))
    text = str(info.value)
    # The first request of a launch: the owner Lease, made before any object.
    assert "user 'openenv-limited' may not create leases" in text, text
    assert 'apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: [create]' in text
    with pytest.raises(AccessDenied, match="may not list pods"):
        prov.ps()


def test_quota_refusal_names_the_quota(kube: Any) -> None:
    namespace = f"{kube.namespace}-q"
    kube.core.create_namespace({"metadata": {"name": namespace}})
    try:
        kube.core.create_namespaced_resource_quota(namespace, {
            "metadata": {"name": "tiny"}, "spec": {"hard": {"limits.memory": "64Mi"}}})
        prov = KubernetesProvider(kubeconfig=kube.kubeconfig, namespace=namespace)
        with pytest.raises(QuotaExceeded) as info:
            prov.start(LaunchSpec(env="echo", startup_timeout_s=30))
        assert "exceeded quota: tiny" in str(info.value)
        assert prov.ps(all_owners=True) == []
    finally:
        kube.core.delete_namespace(namespace)


def test_unreachable_api_server_is_a_clear_error(tmp_path: Path, kube: Any) -> None:
    with socket.socket() as s:  # a port on 127.0.0.1 that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    text = Path(kube.kubeconfig).read_text()
    dead = tmp_path / "kubeconfig"
    dead.write_text(text.replace(text.split("server: ")[1].split()[0], f"https://127.0.0.1:{port}"))
    prov = KubernetesProvider(kubeconfig=str(dead), namespace=kube.namespace)
    started = time.monotonic()
    with pytest.raises(KubernetesUnavailable, match="did not answer while creating the owner lease"):
        prov.start(LaunchSpec(env="echo", startup_timeout_s=30))
    assert time.monotonic() - started < 20


@pytest.mark.slow_ok("fills a warm pool of Pods and waits for each to be ready, then for all to be deleted: on a "
                     "loaded one-node cluster Pod start and deletion take tens of seconds each")
def test_warm_pool_hands_out_ready_servers(provider: KubernetesProvider, kube: Any, echo_image: str) -> None:
    spec = LaunchSpec(env="echo", token="pool-tok", startup_timeout_s=120, options={"warm_pool": 2})
    first = provider.start(spec)
    try:
        (pool,) = provider._pools.values()
        assert pool.wait_full(180), pool.last_error
        started = time.monotonic()
        second = provider.start(spec)
        took = time.monotonic() - started
        try:
            assert second.is_running() and took < 5, took
            replies = raw_episode(second.base_url, token="pool-tok")
            assert replies[-1]["type"] == "state"
        finally:
            second.stop()
    finally:
        first.stop()
        provider.close_pools()
    assert kube.wait_no_leftovers() == []


def test_a_create_whose_reply_is_lost_leaves_nothing(provider: KubernetesProvider, kube: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server commits the Pod but its reply never arrives (a timeout on a loaded cluster):
    the failed launch still deletes the Pod it cannot see."""
    real = provider._create

    def committed_then_lost(cluster: Any, kind: str, body: dict[str, Any], doing: str) -> None:
        real(cluster, kind, body, doing)
        raise KubernetesUnavailable(f"the API server did not answer while {doing} (simulated lost reply)")

    monkeypatch.setattr(provider, "_create", committed_then_lost)
    with pytest.raises(KubernetesUnavailable, match="simulated lost reply"):
        provider.start(LaunchSpec(env="echo", startup_timeout_s=30))
    assert kube.wait_no_leftovers() == []


def test_openenv_run_plays_two_episodes_and_leaves_nothing(kube: Any, echo_image: str) -> None:
    openenv = shutil.which("openenv", path=str(Path(sys.executable).parent))
    assert openenv, "the openenv command is not installed next to this interpreter"
    env = {**os.environ, "KUBECONFIG": kube.kubeconfig, "OPENENV_K8S_NAMESPACE": kube.namespace}
    done = subprocess.run([openenv, "run", "echo", "--provider", "kubernetes", "--episodes", "2", "--seed", "1",
                           "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["provider"] == "kubernetes" and len(summary["per_episode"]) == 2, summary
    assert all(e["steps"] > 0 for e in summary["per_episode"])
    assert kube.wait_no_leftovers() == []


def _api_server_pid(kube: Any) -> int | None:
    pids = Path(kube.kubeconfig).parent / "run" / "pids"
    if not pids.is_file():
        return None
    for line in pids.read_text().splitlines():
        name, _, pid = line.partition(" ")
        if name == "kube-apiserver" and pid.strip().isdigit():
            return int(pid)
    return None


def _wait_controllers_back(kube: Any, timeout_s: float = 90.0) -> None:
    """After an API-server restart the controller-manager's watches back off for a while: wait
    (bounded) until it makes a new namespace's default ServiceAccount again, so the tests after
    this one meet a cluster whose controllers work."""
    probe = f"{kube.namespace}-probe-{os.getpid()}"
    kube.core.create_namespace({"metadata": {"name": probe}})
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(sa.metadata.name == "default" for sa in kube.core.list_namespaced_service_account(probe).items):
                return
            time.sleep(0.5)
    finally:
        kube.core.delete_namespace(probe)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow_ok("kills the API server mid-launch, restarts it, then waits until the controller-manager "
                     "works again (its watches back off after the restart): about 45 s, 85 s on a loaded machine")
def test_api_server_gone_mid_launch_is_clear_and_leaks_nothing(provider: KubernetesProvider, kube: Any,
                                                              echo_image: str,
                                                              skip_or_fail: Callable[[str], NoReturn]) -> None:
    """Stop the API server (the one .ci/k8s-setup.sh started, by its PID) while a launch waits for
    its Pod; the launch fails fast and clearly, and once the API server is back the queued
    deletion removes the Pod and Service."""
    import signal
    import threading

    pid = _api_server_pid(kube)
    setup = Path(__file__).resolve().parents[3] / ".ci" / "k8s-setup.sh"
    if pid is None or not setup.is_file():
        skip_or_fail("the API server was not started by .ci/k8s-setup.sh here (no PID to stop and restart)")
    slow = ["sh", "-c", "sleep 300; exec python -m openenv serve echo --host 0.0.0.0 --port 8000"]
    outcome: dict[str, Any] = {}

    def launch() -> None:
        started = time.monotonic()
        try:
            provider.start(LaunchSpec(env="echo", startup_timeout_s=240, options={"args": slow}))
        except BaseException as exc:
            outcome["error"] = exc
        outcome["took"] = time.monotonic() - started

    thread = threading.Thread(target=launch, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    pods: list[Any] = []
    while time.monotonic() < deadline and not pods:
        pods = [p for p in kube.core.list_namespaced_pod(kube.namespace).items if p.status.phase == "Running"]
        time.sleep(0.2)
    assert pods, "the slow Pod never started running"
    os.kill(pid, signal.SIGKILL)  # gone at once, as in a crash (SIGTERM drains watches for a minute)
    try:
        thread.join(60)
        assert not thread.is_alive(), "start() hung after the API server went away"
        assert isinstance(outcome.get("error"), KubernetesUnavailable), outcome
        assert "did not answer" in str(outcome["error"]) or "broke the connection" in str(outcome["error"])
    finally:
        deadline = time.monotonic() + 30
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        restart = subprocess.run([str(setup), "control-plane"], timeout=180, capture_output=True, text=True)
        assert restart.returncode == 0, restart.stderr[-3000:]
        _wait_controllers_back(kube)
    # Back: the next call of this process retries the queued deletions.
    provider.ps(all_owners=True)
    assert kube.wait_no_leftovers(60) == []
