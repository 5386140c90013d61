"""Deleting the provider's Pods and Services: at once, retried while the API server does not answer,
or queued and retried later in this process (``retry_pending``, also at exit); what is left the
``gc`` of another process removes (owner labels and Leases: ``openenv_provider_kubernetes.lease``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from openenv_provider_kubernetes.cluster import Cluster, KubernetesUnavailable, reraise, status_of
from openenv_provider_kubernetes.lease import retry_deletions

__all__ = ["API_TIMEOUT", "DISCARD_RETRY_S", "core_api", "delete_object", "delete_or_queue", "retry_pending"]

log = logging.getLogger("openenv.provider.kubernetes")
#: (connect, read) seconds of every call to the API server.
API_TIMEOUT = (5, 30)
#: How long a discarded server's deletion is retried before it is queued (see ``KubernetesHandle.discard``).
DISCARD_RETRY_S = 20.0
#: Deletions the API server could not take (it was gone): (cluster, kind, namespace, name).
_PENDING: list[tuple[Cluster, str, str, str]] = []
_PENDING_LOCK = threading.Lock()


def core_api(cluster: Cluster) -> Any:
    from kubernetes import client

    return client.CoreV1Api(cluster.api_client)


def delete_object(cluster: Cluster, kind: str, namespace: str, name: str, *, grace_s: int | None = None) -> bool:
    """Delete a Pod or Service; ``True`` when it is gone or going (404 counts as gone)."""
    core = core_api(cluster)
    try:
        # The reply is not read into a model: API servers differ in what a delete returns (the object,
        # or a Status for Services before 1.22), and only the HTTP status matters here.
        if kind == "pod":
            reply = core.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_s,
                                               _request_timeout=API_TIMEOUT, _preload_content=False)
        else:
            reply = core.delete_namespaced_service(name, namespace, _request_timeout=API_TIMEOUT,
                                                   _preload_content=False)
        reply.read()  # drained, so the pooled connection is clean for the next request
        reply.release_conn()
    except Exception as exc:
        if status_of(exc) == 404:
            return True
        reraise(exc, doing=f"deleting the {kind} {namespace}/{name}", server=cluster.server)
    return True


def delete_or_queue(cluster: Cluster, kind: str, namespace: str, name: str, *, grace_s: int | None,
                     retry_s: float) -> None:
    """Delete, retrying while the API server does not answer (up to ``retry_s``), else queue it."""
    deadline = time.monotonic() + retry_s
    while True:
        try:
            delete_object(cluster, kind, namespace, name, grace_s=grace_s)
            return
        except KubernetesUnavailable as exc:
            if time.monotonic() >= deadline:
                with _PENDING_LOCK:
                    _PENDING.append((cluster, kind, namespace, name))
                log.warning("could not delete %s %s/%s (%s); will retry later in this process, else "
                            "`gc` removes it", kind, namespace, name, exc)
                return
            time.sleep(0.5)


def retry_pending() -> int:
    """Retry the queued deletions (Pods, Services, owner Leases) once; returns how many are still queued."""
    leases_left = retry_deletions()
    with _PENDING_LOCK:
        todo = list(_PENDING)
        _PENDING.clear()
    for cluster, kind, namespace, name in todo:
        try:
            delete_object(cluster, kind, namespace, name, grace_s=0)
        except Exception:
            with _PENDING_LOCK:
                _PENDING.append((cluster, kind, namespace, name))
    with _PENDING_LOCK:
        return len(_PENDING) + leases_left
