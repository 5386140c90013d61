"""The Kubernetes runtime: the agent's Pod, commands through the API's exec, grading in a fresh Pod.

* :func:`start` builds the task's image with the Docker runtime's offline build
  (:func:`openenv_harbor.docker.build`; the node runs Pods on the same Docker engine, so the Pod
  uses it with ``imagePullPolicy: Never``) and creates the agent's Pod: no service-account token,
  no service links, no privilege escalation, every capability dropped, seccomp ``RuntimeDefault``,
  limits from ``[environment] cpus``/``memory_mb``, ``activeDeadlineSeconds`` from ``[agent]
  timeout_sec``, no DNS server, not on the host's network, and (unless ``allow_internet``) a
  deny-all ``NetworkPolicy`` (enforced only where the cluster runs a policy engine).
* :func:`exec_command` runs ``bash -c command`` in ``/app`` through the API server's exec
  (``kubernetes.stream``); on the time limit every process of the container but its idle pid 1 is
  killed.
* :func:`grade` streams ``/app`` out of the agent's Pod as a tar (bounded:
  :data:`SNAPSHOT_LIMIT_MB`), drops git hooks and the config sections that run commands on the way,
  starts a FRESH grading Pod from the same image as uid 65534 (no token, no network, emptyDirs at
  ``/app``, ``/tests`` and ``/logs``), streams the copied tree and the task's original ``tests/``
  (from the task folder on this machine, never from the agent's Pod) into it, runs ``bash
  /tests/test.sh`` in ``/app`` and reads ``/logs/verifier`` back as a tar into a host folder, where
  :func:`openenv_harbor.box.read_reward` reads the reward fail-closed. The grading Pod is deleted
  afterwards, also on errors and timeouts.
* :func:`close` deletes the agent's Pod (and its NetworkPolicy) and the image.

Every Pod carries the label :data:`LABEL` and the kubernetes provider's owner labels, owner
annotation and owner Lease (``openenv_provider_kubernetes.naming``/``lease``), so ``openenv providers
gc kubernetes`` removes the Pods of a process that died. The cluster is the kubernetes provider's
configuration: ``$KUBECONFIG``, ``$OPENENV_K8S_CONTEXT`` and ``$OPENENV_K8S_NAMESPACE``.
"""

from __future__ import annotations

import io
import json
import math
import os
import tarfile
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_harbor import docker as docker_rt
from openenv_harbor.box import GRADER_UID, OUTPUT_TAIL, BoxResult, Grade, read_reward
from openenv_harbor.gitdefuse import forced_env
from openenv_harbor.tartree import add_tests, copy_workspace, read_reward_files
from openenv_harbor.task import HarborTask, HarborTaskError

__all__ = ["LABEL", "SNAPSHOT_LIMIT_MB", "Pod", "available", "close", "copy_in", "exec_command", "grade", "leftovers",
           "release_image", "run_oracle", "snapshot_into", "start"]

LABEL = "org.openenv.harbor"
LABEL_ROLE = "org.openenv.harbor/role"
LABEL_TASK = "org.openenv.harbor/task"
#: The largest workspace snapshot streamed out of the agent's Pod, in MiB (``$OPENENV_HARBOR_K8S_SNAPSHOT_MB``).
SNAPSHOT_LIMIT_MB = float(os.environ.get("OPENENV_HARBOR_K8S_SNAPSHOT_MB", "256"))
#: Seconds a Pod lives past its task's timeout (start-up, snapshot, clean-up), then the kubelet ends it.
DEADLINE_SLACK_S = 180
_START_TIMEOUT_S = 120.0
_API = (5, 30)
_REWARD_LIMIT = 1 << 20
#: pid 1 of every Pod: the folders the local box has (/solution for the oracle, /logs), then idle.
_IDLE = "mkdir -p /solution /logs/agent /logs/verifier 2>/dev/null; exec sleep infinity"


@dataclass
class Pod:
    """One running Pod of a task (the agent's or a grader's) and what it needs to be reached."""

    task: HarborTask
    image: str
    name: str
    namespace: str
    core: Any
    lease: Any
    cluster: Any
    policy: bool = False


_NO_PROVIDER = ("the Kubernetes runtime needs openenvkit-provider-kubernetes (pip install "
                "'openenvkit-harbor[kubernetes]')")


def _cluster() -> Any:
    try:
        from openenv_provider_kubernetes.cluster import connect
        from openenv_provider_kubernetes.options import parse_options
    except ImportError:
        raise HarborTaskError(_NO_PROVIDER) from None
    return connect(parse_options({}))


def available() -> str:
    """Why no Kubernetes runtime can run here ("" when it can): the provider package or an API server
    that answers is missing."""
    try:
        cluster = _cluster()
        from kubernetes import client

        client.CoreV1Api(cluster.api_client).list_namespaced_pod(cluster.namespace, limit=1, _request_timeout=5)
    except HarborTaskError as exc:
        return str(exc)
    except Exception as exc:
        return f"no Kubernetes API server answers ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    return ""


def leftovers() -> list[str]:
    """The names of the Pods labelled :data:`LABEL` in the configured namespace."""
    from kubernetes import client

    cluster = _cluster()
    core: Any = client.CoreV1Api(cluster.api_client)
    pods = core.list_namespaced_pod(cluster.namespace, label_selector=f"{LABEL}=1", _request_timeout=_API)
    return sorted(p.metadata.name for p in pods.items)


def _quantity_mi(memory_mb: int) -> str:
    return f"{memory_mb}Mi"


def _resources(task: HarborTask) -> dict[str, dict[str, str]]:
    limits: dict[str, str] = {}
    requests = {"cpu": "100m", "memory": "64Mi"}
    if task.cpus:
        limits["cpu"] = f"{task.cpus:g}"
        requests["cpu"] = f"{min(0.1, task.cpus):g}"
    if task.memory_mb:
        limits["memory"] = _quantity_mi(task.memory_mb)
        requests["memory"] = _quantity_mi(min(64, task.memory_mb))
    return {"limits": limits, "requests": requests}


def _pod_body(task: HarborTask, image: str, name: str, role: str, lease: Any, deadline_s: float,
              env: dict[str, str] | None = None, grader: bool = False) -> dict[str, Any]:
    from openenv.interfaces import owner_id
    from openenv_provider_kubernetes.lease import ANNOTATION_LEASE
    from openenv_provider_kubernetes.naming import ANNOTATION_OWNER, label_value, managed_labels

    owner = owner_id()
    labels = managed_labels(owner=owner, env="harbor", instance=name,
                            extra={LABEL: "1", LABEL_ROLE: role, LABEL_TASK: label_value(task.id)})
    security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if grader:  # the grader's user owns only its emptyDirs: the copied tree, the tests and /logs
        security.update(runAsUser=GRADER_UID, runAsGroup=GRADER_UID, fsGroup=GRADER_UID, runAsNonRoot=True)
        for mount in ("app", "tests", "logs", "tmp"):
            volumes.append({"name": mount, "emptyDir": {"sizeLimit": f"{int(SNAPSHOT_LIMIT_MB) + 64}Mi"}})
            mounts.append({"name": mount, "mountPath": f"/{mount}"})
    container: dict[str, Any] = {
        "name": "box", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", _IDLE],
        "workingDir": "/app", "resources": _resources(task), "volumeMounts": mounts,
        "env": [{"name": k, "value": v} for k, v in sorted((env or {}).items())],
        "securityContext": {"allowPrivilegeEscalation": False, "privileged": False,
                            "capabilities": {"drop": ["ALL"]}},
    }
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {ANNOTATION_OWNER: owner, ANNOTATION_LEASE: lease.name}},
        "spec": {
            "automountServiceAccountToken": False, "enableServiceLinks": False, "hostNetwork": False,
            # no DNS server (nothing listens on the Pod's own 127.0.0.1:53)
            "dnsPolicy": "None", "dnsConfig": {"nameservers": ["127.0.0.1"]},
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "activeDeadlineSeconds": math.ceil(deadline_s) + DEADLINE_SLACK_S,
            "securityContext": security, "containers": [container], "volumes": volumes,
        },
    }


def _policy_body(pod: dict[str, Any], uid: str) -> dict[str, Any]:
    """A deny-all NetworkPolicy for one Pod, owned by it (the API's garbage collector deletes it with the Pod)."""
    name = pod["metadata"]["name"]
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "labels": pod["metadata"]["labels"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}]},
        "spec": {"podSelector": {"matchLabels": {"openenv.org/instance": name}},
                 "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []},
    }


def _create(task: HarborTask, image: str, role: str, deadline_s: float, *, network: bool = False,
            env: dict[str, str] | None = None, grader: bool = False) -> Pod:
    """Create a Pod and wait (bounded) until its container runs; on any failure nothing is left."""
    from kubernetes import client

    from openenv_provider_kubernetes.cluster import reraise
    from openenv_provider_kubernetes.lease import DEFAULT_DURATION_S, hold
    from openenv_provider_kubernetes.pods import wait_scheduled_ready

    cluster = _cluster()
    core: Any = client.CoreV1Api(cluster.api_client)
    networking: Any = client.NetworkingV1Api(cluster.api_client)
    ns = cluster.namespace
    base = "".join(c if c.isalnum() else "-" for c in task.id.lower()).strip("-")[:40] or "task"
    name = f"harbor-{base}-{role[0]}{uuid.uuid4().hex[:8]}"
    lease = hold(cluster, DEFAULT_DURATION_S)
    pod = Pod(task, image, name, ns, core, lease, cluster)
    body = _pod_body(task, image, name, role, lease, deadline_s, env, grader)
    try:
        try:
            made = core.create_namespaced_pod(ns, body, _request_timeout=_API)
            if not network:
                networking.create_namespaced_network_policy(
                    ns, _policy_body(body, made.metadata.uid), _request_timeout=_API)
                pod.policy = True
            wait_scheduled_ready(core, ns, name, time.monotonic() + _START_TIMEOUT_S)
        except Exception as exc:
            reraise(exc, doing=f"starting the {role} Pod {ns}/{name} of task {task.id!r}", server=cluster.server)
    except BaseException as exc:
        _delete(pod)
        if isinstance(exc, Exception) and not isinstance(exc, HarborTaskError):
            raise HarborTaskError(f"task {task.id!r}: the {role} Pod did not start: {exc}", task=task.id) from exc
        raise
    return pod


def _delete(pod: Pod, wait_s: float = 60.0) -> None:
    """Delete the Pod (grace 0) and its NetworkPolicy, wait (bounded) until the Pod is gone, release the Lease."""
    from kubernetes import client

    from openenv_provider_kubernetes.cluster import status_of

    try:
        for delete in (lambda: pod.core.delete_namespaced_pod(pod.name, pod.namespace, grace_period_seconds=0,
                                                              _request_timeout=_API),
                       lambda: client.NetworkingV1Api(pod.cluster.api_client).delete_namespaced_network_policy(
                           pod.name, pod.namespace, _request_timeout=_API) if pod.policy else None):
            try:
                delete()
            except Exception as exc:
                if status_of(exc) != 404:
                    raise
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                pod.core.read_namespaced_pod(pod.name, pod.namespace, _request_timeout=_API)
            except Exception as exc:
                if status_of(exc) == 404:
                    break
                raise
            time.sleep(0.2)
    finally:
        pod.lease.release()


def start(task: HarborTask, image: str | None = None) -> Pod:
    """Build (unless ``image`` is given) and start the agent's Pod; it idles until commands come."""
    image = image or docker_rt.build(task)
    return _create(task, image, "agent", task.agent_timeout_s, network=task.allow_internet)


class _TooLarge(Exception):
    """stdout passed the ``limit`` of :func:`_exec` (the stream was cut, the processes killed)."""


def _exec(pod: Pod, argv: Sequence[str], timeout_s: float, *, stdin: bytes | None = None,
          limit: int | None = None, tail: int | None = None, cleanup: bool = True) -> tuple[int, bytes, bytes]:
    """Run argv in the Pod's container through the API's exec: (status, stdout, stderr).

    Status 124: ``timeout_s`` hit. stdout is kept whole up to ``limit`` bytes (past it: ``_TooLarge``),
    or only its last ``tail`` bytes; stderr's tail only. A stream cut short has every process of the
    container but pid 1 killed (``cleanup``)."""
    from kubernetes.stream import stream

    ws = stream(pod.core.connect_get_namespaced_pod_exec, pod.name, pod.namespace, command=list(argv),
                stdin=stdin is not None, stdout=True, stderr=True, tty=False, _preload_content=False, binary=True)
    if hasattr(ws, "_all"):
        ws._all = io.BytesIO()  # the client keeps a copy of all output: bounded here by reading it away
    out, err, status = bytearray(), bytearray(), 0
    deadline = time.monotonic() + timeout_s
    try:
        if stdin is not None:
            for offset in range(0, len(stdin), 1 << 16):
                ws.write_stdin(stdin[offset:offset + (1 << 16)])
        while ws.is_open():
            left = deadline - time.monotonic()
            if left <= 0:
                status = 124
                break
            ws.update(timeout=min(left, 1.0))
            out += ws.read_channel(1) or b""
            err = (err + (ws.read_channel(2) or b""))[-OUTPUT_TAIL:]
            ws._all = io.BytesIO()
            if tail is not None and len(out) > tail:
                del out[:-tail]
            if limit is not None and len(out) > limit:
                status = -1
                break
        out += ws.read_channel(1) or b""
        err = (err + (ws.read_channel(2) or b""))[-OUTPUT_TAIL:]
        if status == 0:
            status = _exit_status(ws.read_channel(3) or b"")
    finally:
        ws.close()
    if status in (124, -1) and cleanup:  # the stream is cut, not what it ran: end all processes but pid 1
        _exec(pod, ["sh", "-c", "kill -9 -1"], 30, cleanup=False)
    if status == -1:
        raise _TooLarge(f"the output of {argv[0]} passed {limit} bytes")
    return status, bytes(out), bytes(err)


def _exit_status(error_channel: bytes) -> int:
    try:
        doc = json.loads(error_channel or b"{}")
    except ValueError:
        return 1
    if doc.get("status") == "Success":
        return 0
    for cause in (doc.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            return int(cause.get("message", 1))
    return 1 if not doc else 126  # 126: the command could not be run (e.g. not found in the image)


def exec_command(pod: Pod, command: str, timeout_s: float, workdir: str = "/app") -> BoxResult:
    """``bash -c command`` in the Pod, cwd ``workdir``; cut at ``timeout_s`` (status 124)."""
    start_t = time.monotonic()
    try:
        status, out, err = _exec(pod, ["bash", "-c", 'cd "$1" && exec bash -c "$0"', command, workdir], timeout_s,
                                 tail=OUTPUT_TAIL * 4)
    except Exception as exc:  # the Pod is gone (its deadline, someone deleted it) or the API server is
        return BoxResult(126, f"the command could not run in the Pod {pod.name}: {type(exc).__name__}: {exc}",
                         time.monotonic() - start_t)
    output = (out + err).decode("utf-8", "replace")
    return BoxResult(status, output[-OUTPUT_TAIL:], time.monotonic() - start_t)


def snapshot_into(pod: Pod, dst: tarfile.TarFile) -> None:
    """Add the agent's /app to ``dst`` under ``app/``: git defused, only files, folders and symlinks,
    setuid bits cleared. HarborTaskError when it is over the limit or unreadable."""
    limit = int(SNAPSHOT_LIMIT_MB * 1024 * 1024)
    try:
        status, raw, err = _exec(pod, ["tar", "-c", "-f", "-", "-C", "/app", "."], 300, limit=limit)
    except _TooLarge:
        raise HarborTaskError(f"task {pod.task.id!r}: the workspace /app is over {SNAPSHOT_LIMIT_MB:g} MiB as a tar "
                              "($OPENENV_HARBOR_K8S_SNAPSHOT_MB)", task=pod.task.id) from None
    try:
        copy_workspace(raw, dst)
    except tarfile.TarError as exc:
        raise HarborTaskError(f"task {pod.task.id!r}: the workspace /app could not be copied (tar exited {status}: "
                              f"{exc}; {err.decode('utf-8', 'replace')[-500:]})", task=pod.task.id) from None


def _grading_tar(pod: Pod) -> bytes:
    """The copied tree plus the task's original tests/ (read-only modes), members under app/ and tests/."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:") as dst:
        snapshot_into(pod, dst)
        add_tests(dst, pod.task.path / "tests")
    return out.getvalue()


def grade(pod: Pod, scratch: Path | None = None) -> Grade:
    """Copy /app out of the agent's Pod into a fresh grading Pod (uid 65534) with the original tests; the
    reward read fail-closed. Never raises for a bad workspace or verifier: reward 0 with the error."""
    task = pod.task
    start_t = time.monotonic()
    status, output, why = 1, "", ""
    reward: float | None = None
    components: dict[str, float] = {}
    env = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "HOME": "/tmp", **forced_env()}
    grader: Pod | None = None
    try:
        tree = _grading_tar(pod)
        grader = _create(task, pod.image, "grader", task.verifier_timeout_s, env=env, grader=True)
        copied, _, err = _exec(grader, ["sh", "-c", f"head -c {len(tree)} | tar -x -f - -C / --no-same-owner && "
                                        "mkdir -p /logs/verifier"], 300, stdin=tree)
        if copied != 0:
            raise HarborTaskError(f"task {task.id!r}: the copied tree did not unpack in the grading Pod (exit "
                                  f"{copied}): {err.decode('utf-8', 'replace')[-500:]}", task=task.id)
        status, out, err = _exec(grader, ["bash", "-c", "cd /app && exec bash /tests/test.sh"],
                                 task.verifier_timeout_s, tail=OUTPUT_TAIL * 4)
        output = (out + err).decode("utf-8", "replace")[-OUTPUT_TAIL:]
        if status == 124:
            why = f"the verifier ran past [verifier] timeout_sec={task.verifier_timeout_s:g}"
        else:
            _, logs, err = _exec(grader, ["tar", "-c", "-f", "-", "-C", "/logs", "verifier"], 60,
                                 limit=_REWARD_LIMIT * 4)
            with tempfile.TemporaryDirectory(prefix=f"harbor-kgrade-{task.id}-", dir=scratch) as tmp:
                read_reward_files(logs, Path(tmp))
                reward, components, why = read_reward(Path(tmp))
    except Exception as exc:  # the workspace, the Pod or the API server: a failed grading is reward 0
        why = str(exc)
    finally:
        if grader is not None:
            _delete(grader)
    if reward is None:
        return Grade(0.0, {}, f"task {task.id!r}: reward 0 (fail closed): {why}", status, output,
                     time.monotonic() - start_t, GRADER_UID)
    return Grade(reward, components, "", status, output, time.monotonic() - start_t, GRADER_UID)


def release_image(image: str, wait_s: float = 120.0) -> None:
    """Remove the task's image once no container of the engine uses it (bounded by ``wait_s``): an
    image removed while a container uses it stays behind untagged. The kubelet removes a deleted
    Pod's exited containers only at its next garbage collection (up to a minute later), so those are
    removed here at once; a container still running is waited for."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        users = docker_rt._docker("ps", "-aq", "--filter", f"ancestor={image}", timeout=30).stdout.split()
        if not users:
            break
        done = docker_rt._docker("ps", "-aq", "--filter", f"ancestor={image}", "--filter", "status=exited",
                                 "--filter", "status=created", "--filter", "status=dead", timeout=30)
        done_ids = done.stdout.decode().split()
        if done_ids:
            docker_rt._docker("rm", "-f", *done_ids, timeout=60)
            continue
        time.sleep(1.0)
    docker_rt._docker("rmi", "-f", image, timeout=60)


def close(pod: Pod, remove_image: bool = True) -> None:
    """Delete the agent's Pod (waiting, bounded, until it is gone) and the task's image (:func:`release_image`)."""
    _delete(pod)
    if remove_image:
        release_image(pod.image)


def copy_in(pod: Pod, folder: Path, dest: str) -> None:
    """Stream a host folder into the Pod at ``dest`` (a tar through exec); HarborTaskError when it fails."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:") as tar:
        tar.add(str(folder), dest.strip("/"))
    data = buffer.getvalue()
    copied, _, err = _exec(pod, ["sh", "-c", f"head -c {len(data)} | tar -x -f - -C /"], 60, stdin=data)
    if copied != 0:
        raise HarborTaskError(f"task {pod.task.id!r}: {folder} did not reach the Pod's {dest}: "
                              f"{err.decode('utf-8', 'replace')[-500:]}", task=pod.task.id)


def run_oracle(task: HarborTask, scratch: Path | None = None, image: str | None = None) -> tuple[Grade, BoxResult]:
    """Start, stream ``solution/`` in, run solve.sh (cut at [agent] timeout_sec), grade, clean up."""
    pod = start(task, image)
    try:
        copy_in(pod, task.path / "solution", "/solution")
        solved = exec_command(pod, "bash /solution/solve.sh", task.agent_timeout_s)
        return grade(pod, scratch), solved
    finally:
        close(pod, remove_image=image is None)
