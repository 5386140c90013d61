"""Owner leases and cross-host ``gc`` on the real API server (``lease.py``).

* This process's Lease: created with the first server, renewed by its thread, one for all the
  servers of the process, deleted with the last.
* Objects of a made-up owner on another host: with an expired Lease or none gc removes them (and
  the expired Lease), with a fresh Lease it keeps them; objects that name no lease are kept.
* A trainer on "another host" (a child process in a UTS namespace of its own, hostname
  ``laptop-…``) launches echo and is SIGKILLed: its Lease stays while it is fresh (gc here keeps the
  objects), then expires, and gc here removes the Pod, the Service and the Lease.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import pytest

from openenv.interfaces import LaunchSpec, owner_id
from openenv_provider_kubernetes.lease import ANNOTATION_LEASE, lease_name
from openenv_provider_kubernetes.naming import ANNOTATION_OWNER, managed_labels
from openenv_provider_kubernetes.provider import KubernetesProvider

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]


def _leases(kube: Any) -> Any:
    from kubernetes import client

    return client.CoordinationV1Api(kube.core.api_client)


def _read_lease(kube: Any, name: str) -> Any | None:
    try:
        return _leases(kube).read_namespaced_lease(name, kube.namespace)
    except Exception as exc:
        if getattr(exc, "status", None) == 404:
            return None
        raise


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_process_holds_one_lease_renewed_while_it_owns_servers(provider: KubernetesProvider, kube: Any,
                                                                 echo_image: str) -> None:
    name = lease_name(owner_id())
    assert _read_lease(kube, name) is None
    spec = LaunchSpec(env="echo", startup_timeout_s=120, options={"lease_duration_s": 3})
    first = provider.start(spec)
    try:
        lease = _read_lease(kube, name)
        assert lease is not None, "no owner lease while a server runs"
        assert (lease.spec.holder_identity, lease.spec.lease_duration_seconds) == (owner_id(), 3)
        assert lease.metadata.annotations[ANNOTATION_OWNER] == owner_id()
        assert lease.metadata.labels["openenv.org/role"] == "owner-lease"
        pod = kube.core.read_namespaced_pod(first.id, kube.namespace)
        assert pod.metadata.annotations[ANNOTATION_LEASE] == name
        service = kube.core.read_namespaced_service(first.id, kube.namespace)
        assert service.metadata.annotations[ANNOTATION_LEASE] == name
        second = provider.start(spec)
        renewed = lease.spec.renew_time
        deadline = time.monotonic() + 10
        while _read_lease(kube, name).spec.renew_time <= renewed:  # renewed every second (3 s / 3)
            assert time.monotonic() < deadline, "the lease was never renewed"
            time.sleep(0.2)
        assert len([x for x in _leases(kube).list_namespaced_lease(kube.namespace).items
                    if x.spec.holder_identity == owner_id()]) == 1
        (info,) = [i for i in provider.ps() if i.id == first.id]
        assert info.status.startswith("running; owner on this host running, lease live, renewed "), info.status
        second.stop()
        assert _read_lease(kube, name) is not None, "the lease went with a server while another still runs"
    finally:
        first.stop()
    assert _read_lease(kube, name) is None, "the lease outlived the owner's last server"
    assert kube.wait_no_leftovers() == []


def _fake_objects(kube: Any, owner: str, *, lease: str | None) -> str:
    """A Pod (never scheduled: no node matches) and its Service as this provider labels them."""
    name = f"openenv-fake-{uuid.uuid4().hex[:8]}"
    labels = managed_labels(owner=owner, env="fake", instance=name)
    annotations = {ANNOTATION_OWNER: owner, **({ANNOTATION_LEASE: lease} if lease else {})}
    meta = {"name": name, "labels": labels, "annotations": annotations}
    kube.core.create_namespaced_pod(kube.namespace, {"metadata": meta, "spec": {
        "nodeSelector": {"openenv.org/no-such-node": "true"}, "automountServiceAccountToken": False,
        "containers": [{"name": "server", "image": "openenv-no-such-image:0", "imagePullPolicy": "Never"}]}})
    kube.core.create_namespaced_service(kube.namespace, {"metadata": meta, "spec": {
        "selector": {"openenv.org/instance": name}, "ports": [{"port": 8000}]}})
    return name


def _fake_lease(kube: Any, owner: str, *, renewed: datetime, duration_s: int = 60) -> str:
    name = lease_name(owner)
    _leases(kube).create_namespaced_lease(kube.namespace, {
        "metadata": {"name": name, "annotations": {ANNOTATION_OWNER: owner},
                     "labels": {"openenv.org/managed": "true", "openenv.org/provider": "kubernetes",
                                "openenv.org/role": "owner-lease"}},
        "spec": {"holderIdentity": owner, "leaseDurationSeconds": duration_s, "renewTime": _micro(renewed)}})
    return name


def test_gc_judges_another_hosts_owner_by_its_lease(provider: KubernetesProvider, kube: Any) -> None:
    now = datetime.now(UTC)
    tag = uuid.uuid4().hex[:6]
    expired, fresh, missing, legacy = (f"laptop-{tag}-{n}:4242:123456" for n in ("a", "b", "c", "d"))
    expired_lease = _fake_lease(kube, expired, renewed=now - timedelta(seconds=120))
    fresh_lease = _fake_lease(kube, fresh, renewed=now)
    objects = {
        expired: _fake_objects(kube, expired, lease=expired_lease),
        fresh: _fake_objects(kube, fresh, lease=fresh_lease),
        missing: _fake_objects(kube, missing, lease=lease_name(missing)),  # its lease was never there
        legacy: _fake_objects(kube, legacy, lease=None),  # made before leases: cannot know
    }
    try:
        states = {i.id: i.status for i in provider.ps(all_owners=True)}
        # Renewed 120 s before `now` with a 60 s lease: expired 60 s before `now`, plus however long
        # the set-up and ps took (seconds on a loaded machine).
        waited = (datetime.now(UTC) - now).total_seconds()
        said = re.search(f"owner on laptop-{tag}-a, lease expired ([0-9]+)s ago", states[objects[expired]])
        assert said and 59 <= int(said.group(1)) <= 61 + waited, (states, waited)
        assert f"owner on laptop-{tag}-b, lease live, renewed" in states[objects[fresh]], states
        assert "lease missing" in states[objects[missing]] and "no lease" in states[objects[legacy]], states
        removed = provider.gc()
        assert sorted(i.id for i in removed) == sorted([objects[expired], objects[missing]]), removed
        assert all("removed; owner on laptop-" in i.status for i in removed)
        pods = {p.metadata.name for p in kube.core.list_namespaced_pod(kube.namespace).items}
        services = {s.metadata.name for s in kube.core.list_namespaced_service(kube.namespace).items}
        assert pods == services == {objects[fresh], objects[legacy]}
        assert _read_lease(kube, expired_lease) is None, "gc kept the expired lease"
        assert _read_lease(kube, fresh_lease) is not None
    finally:
        for name in objects.values():
            for delete in (kube.core.delete_namespaced_pod, kube.core.delete_namespaced_service):
                try:  # the reply is not read into a model (1.20 answers a Service delete with a Status)
                    delete(name, kube.namespace, grace_period_seconds=0, _preload_content=False).release_conn()
                except Exception as exc:
                    assert getattr(exc, "status", None) == 404, exc
        for name in (expired_lease, fresh_lease):
            if _read_lease(kube, name) is not None:
                _leases(kube).delete_namespaced_lease(name, kube.namespace)
    assert kube.wait_no_leftovers() == []


_CHILD = textwrap.dedent("""
    import json, sys, time
    from openenv.interfaces import LaunchSpec, owner_id
    from openenv_provider_kubernetes.provider import KubernetesProvider
    handle = KubernetesProvider().start(LaunchSpec(env="echo", startup_timeout_s=120))
    print(json.dumps({"id": handle.id, "owner": owner_id()}), flush=True)
    time.sleep(3600)
""")


@pytest.fixture
def laptop(skip_or_fail: Callable[[str], NoReturn]) -> Iterator[str]:
    """A hostname for a child in a UTS namespace of its own (``unshare -u``): another host, as far
    as owner ids go, on the same loopback."""
    unshare = shutil.which("unshare")
    host = f"laptop-{uuid.uuid4().hex[:6]}"
    probe = subprocess.run([unshare or "unshare", "-u", "sh", "-c", f"hostname {host} && hostname"],
                           capture_output=True, text=True) if unshare else None
    if probe is None or probe.returncode != 0 or probe.stdout.strip() != host:
        skip_or_fail("cannot give a child another hostname here (unshare -u needs CAP_SYS_ADMIN): "
                     f"{probe.stderr.strip() if probe else 'no unshare'}")
    yield host


def test_killed_trainer_on_another_host_is_collected_once_its_lease_expires(
        provider: KubernetesProvider, kube: Any, echo_image: str, laptop: str) -> None:
    env = {**os.environ, "OPENENV_K8S_LEASE_DURATION_S": "6"}  # renewed every 2 s
    child = subprocess.Popen(["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', laptop,
                              sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env, start_new_session=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"the child died before reporting: {child.stderr.read()[-3000:] if child.stderr else ''}"
        info = json.loads(line)
        assert info["owner"].startswith(f"{laptop}:")
        name = lease_name(info["owner"])
        first = _read_lease(kube, name).spec.renew_time
        time.sleep(4.5)  # two renewals while the child lives
        assert _read_lease(kube, name).spec.renew_time > first, "the child's lease was not renewed"
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # as a laptop that dies: no atexit, no stop
        child.wait(30)
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
    killed = time.monotonic()
    lease = _read_lease(kube, name)
    assert lease is not None and lease.spec.holder_identity == info["owner"]
    expires = lease.spec.renew_time + timedelta(seconds=lease.spec.lease_duration_seconds)
    # Still fresh (renewed at most 2 s before the kill): gc on this (other) host keeps the server.
    assert datetime.now(UTC) < expires - timedelta(seconds=1.5), (datetime.now(UTC), expires)
    assert provider.gc() == []
    (state,) = [i.status for i in provider.ps(all_owners=True) if i.id == info["id"]]
    assert f"owner on {laptop}, lease live" in state, state
    assert kube.core.read_namespaced_pod(info["id"], kube.namespace) is not None
    while datetime.now(UTC) < expires + timedelta(seconds=0.5):
        time.sleep(0.2)
    (state,) = [i.status for i in provider.ps(all_owners=True) if i.id == info["id"]]
    assert f"owner on {laptop}, lease expired" in state, state
    removed = provider.gc()
    assert [i.id for i in removed] == [info["id"]], removed
    assert time.monotonic() - killed < 15, "collected long after the 6 s lease expired"
    assert _read_lease(kube, name) is None
    assert kube.wait_no_leftovers() == []
