"""The Kubernetes runtime on a real API server and node (``.ci/k8s-setup.sh``): the demo task's oracle
scores 1 and the no-op 0 in Pods, graded in a fresh Pod as uid 65534 from a copied tree; planted
files and a forged reward do not pay; a task timeout ends and cleans up; the Pods are hardened; no
Pod labelled ``org.openenv.harbor`` is left. Every object lives in a namespace of this module's own.
The task's image is built once (the Docker runtime's offline build, on the node's engine)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from openenv_harbor import docker as docker_rt
from openenv_harbor.env import DEMO_SUITE
from openenv_harbor.task import load_task

FIXTURE = Path(DEMO_SUITE) / "fix-add"
DEFAULT_KUBECONFIG = "/var/cache/openenv/k8s/kubeconfig"

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow, pytest.mark.requires_plugins("provider-kubernetes")]
pytest.importorskip("openenv_provider_kubernetes", reason="needs openenvkit-provider-kubernetes")


def _skip_or_fail(reason: str) -> NoReturn:
    if os.environ.get("OPENENV_REQUIRE_KUBERNETES", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_KUBERNETES is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def namespace() -> Iterator[str]:
    """A namespace of this module's own on the test cluster ($KUBECONFIG and $OPENENV_K8S_NAMESPACE
    point at it); at the end no Pod may be left in it, then it is deleted."""
    from kubernetes import client, config

    path = os.environ.get("OPENENV_K8S_KUBECONFIG", DEFAULT_KUBECONFIG)
    if not Path(path).is_file():
        _skip_or_fail(f"no kubeconfig at {path}: run .ci/k8s-setup.sh (a test cluster on 127.0.0.1) or set "
                      "OPENENV_K8S_KUBECONFIG")
    if not docker_rt.available():
        _skip_or_fail("no Docker engine answers here (.ci/docker-setup.sh): the node runs the task's image from it")
    if subprocess.run(["docker", "image", "inspect", docker_rt.BASE_IMAGE], capture_output=True).returncode:
        _skip_or_fail(f"the base image {docker_rt.BASE_IMAGE} is missing (.ci/docker-setup.sh makes it)")
    api = config.new_client_from_config(config_file=path)
    api.configuration.retries = 0
    core: Any = client.CoreV1Api(api)
    try:
        nodes = core.list_node(_request_timeout=5).items
    except Exception as exc:
        _skip_or_fail(f"the API server of {path} does not answer ({type(exc).__name__}): run .ci/k8s-setup.sh")
    if not any(c.type == "Ready" and c.status == "True" for n in nodes for c in n.status.conditions or []):
        _skip_or_fail(f"the cluster of {path} has no Ready node: run .ci/k8s-setup.sh")
    name = f"openenv-harbor-{uuid.uuid4().hex[:8]}"
    from openenv_provider_kubernetes.testing import create_ready_namespace

    create_ready_namespace(core, name)  # Pods are refused until its default service account exists
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "OPENENV_K8S_NAMESPACE")}
    os.environ.update(KUBECONFIG=path, OPENENV_K8S_NAMESPACE=name)
    try:
        yield name
        left = [p.metadata.name for p in core.list_namespaced_pod(name).items]
        assert not left, f"the harbor kubernetes tests left Pods behind: {left}"
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        core.delete_namespace(name, _request_timeout=10)
        api.close()


@pytest.fixture(scope="module")
def image(namespace: str) -> Iterator[str]:
    from openenv_harbor import k8s

    before = set(docker_rt.leftovers()[1])
    tag = docker_rt.build(load_task(FIXTURE))
    yield tag
    k8s.release_image(tag)  # once the kubelet removed the Pods' containers: no untagged image left behind
    assert set(docker_rt.leftovers()[1]) <= before, "labelled images were left behind"


@pytest.fixture
def counted(namespace: str) -> Iterator[None]:
    from openenv_harbor import k8s

    assert k8s.leftovers() == []
    yield
    assert k8s.leftovers() == [], "labelled Pods were left behind"


@pytest.mark.slow_ok("two Pods per grading on a one-node cluster: the oracle, the no-op, the attacks")
@pytest.mark.usefixtures("counted")
def test_oracle_1_noop_0_and_attacks_0_in_kubernetes(namespace: str, image: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes import client

    from openenv_harbor import k8s

    task = load_task(FIXTURE)
    graded, solved = k8s.run_oracle(task, image=image)
    assert solved.status == 0 and (graded.reward, graded.error, graded.grader_uid) == (1.0, "", 65534), graded
    pod = k8s.start(task, image)
    try:
        spec: Any = client.CoreV1Api(pod.cluster.api_client).read_namespaced_pod(pod.name, namespace).spec
        box = spec.containers[0]
        assert spec.automount_service_account_token is False and spec.host_network in (False, None)
        assert spec.security_context.seccomp_profile.type == "RuntimeDefault"
        assert (box.security_context.allow_privilege_escalation, box.security_context.capabilities.drop) == \
            (False, ["ALL"])
        assert box.resources.limits == {"cpu": "1", "memory": "1Gi"} and box.image_pull_policy == "Never"
        assert spec.active_deadline_seconds >= task.agent_timeout_s
        assert spec.dns_policy == "None"
        policies: Any = client.NetworkingV1Api(pod.cluster.api_client).read_namespaced_network_policy(
            pod.name, namespace)
        assert policies.spec.policy_types == ["Ingress", "Egress"] and not policies.spec.egress
        assert k8s.exec_command(pod, "test -e /var/run/secrets/kubernetes.io/serviceaccount/token", 30).status == 1
        assert k8s.exec_command(pod, "echo hi; exit 3", 30).output.strip() == "hi"
        assert k8s.grade(pod).reward == 0.0  # the no-op
        # forgeries: a reward written ahead, a planted conftest/sitecustomize, a git fsmonitor that would
        # apply the fix as the grader, an edited copy of the tests in the agent's box
        forged = k8s.exec_command(pod, (
            "mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt && "
            "echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh && "
            "printf 'import os\\nopen(\"/logs/verifier/reward.txt\",\"w\").write(\"1\")\\n' > conftest.py && "
            "cp conftest.py sitecustomize.py && "
            "printf '#!/bin/sh\\nsed -i s/-/+/ /app/calc.py\\n' > /app/.fix && chmod 755 /app/.fix && "
            "git config core.fsmonitor /app/.fix && mkdir -p .git/hooks && cp .fix .git/hooks/post-checkout && "
            "git config alias.status '!sh /app/.fix' && ln -s /etc/passwd leak"), 30)
        assert forged.status == 0, forged
        attacked = k8s.grade(pod)
        assert (attacked.reward, attacked.error) == (0.0, ""), attacked  # graded, and the verifier said 0
        monkeypatch.setattr(k8s, "SNAPSHOT_LIMIT_MB", 0.01)  # 10 KiB: less than the repository's tar
        too_big = k8s.grade(pod)
        assert too_big.reward == 0.0 and "the workspace /app is over 0.01 MiB as a tar" in too_big.error, too_big
    finally:
        k8s.close(pod, remove_image=False)


@pytest.mark.usefixtures("counted")
def test_a_task_timeout_ends_the_command_and_cleans_up(tmp_path: Path, image: str) -> None:
    from openenv_harbor import k8s

    hangs = tmp_path / "hangs"
    shutil.copytree(FIXTURE, hangs)
    # a process left running to write the reward later, and a command that never ends
    (hangs / "solution" / "solve.sh").write_text(
        "(sleep 4; sed -i 's/return a - b/return a + b/' /app/calc.py) &\nsleep 300\n")
    (hangs / "task.toml").write_text((hangs / "task.toml").read_text().replace("timeout_sec = 60", "timeout_sec = 2"))
    started = time.monotonic()
    graded, solved = k8s.run_oracle(load_task(hangs), image=image)
    assert solved.timed_out and (graded.reward, graded.error) == (0.0, ""), (solved, graded)
    assert time.monotonic() - started < 200


@pytest.mark.usefixtures("counted")
def test_the_cli_rolls_out_the_demo_task_in_kubernetes(namespace: str) -> None:
    # the docs' command (docs/harbor.md, "The Kubernetes runtime"): the env with runtime="kubernetes",
    # the oracle policy playing it through the env's actions, graded in a fresh Pod
    done = subprocess.run([sys.executable, "-m", "openenv", "harbor", "rollout", DEMO_SUITE, "fix-add",
                           "--policy", "oracle", "--runtime", "kubernetes"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert (doc["reward"], doc["grade"]["grader_uid"], doc["grade"]["error"]) == (1.0, 65534, ""), doc


@pytest.mark.usefixtures("counted")
def test_the_pod_of_a_process_that_died_is_removed_by_the_providers_gc(namespace: str, image: str) -> None:
    import signal

    from openenv_harbor import k8s
    from openenv_provider_kubernetes.provider import KubernetesProvider

    script = ("import time\nfrom openenv_harbor import k8s\nfrom openenv_harbor.task import load_task\n"
              f"pod = k8s.start(load_task({str(FIXTURE)!r}), {image!r})\n"
              "print(pod.name, flush=True)\ntime.sleep(300)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        name = child.stdout.readline().strip()  # bounded: the Pod start is bounded, and the test's timeout
        assert name and k8s.leftovers() == [name]
    finally:
        os.kill(child.pid, signal.SIGKILL)  # the owner dies without cleaning up
        child.wait(timeout=30)
    removed = KubernetesProvider(namespace=namespace).gc()
    assert [h.id for h in removed] == [name]
    deadline = time.monotonic() + 60
    while k8s.leftovers() and time.monotonic() < deadline:
        time.sleep(0.25)

