"""Owner leases: how ``gc`` on any host tells a live owner of objects from a dead one.

Promises:

* While a process owns live objects in a namespace it holds one ``coordination.k8s.io/v1`` Lease
  there (``hold`` … ``OwnerLease.release``): named ``openenv-owner-<hash of the owner id>``,
  labelled as ours (``openenv.org/managed``, ``openenv.org/provider``, ``openenv.org/owner``,
  ``openenv.org/role=owner-lease``), the exact owner id in ``spec.holderIdentity`` and in the
  ``openenv.org/owner`` annotation, ``leaseDurationSeconds`` (``options['lease_duration_s']``, else
  ``$OPENENV_K8S_LEASE_DURATION_S``, else 60; the largest any holder asked for) and ``renewTime``,
  renewed by a daemon thread every third of the duration. ``hold`` creates it before it returns, so
  it exists before the first object does and a refusal (RBAC) fails ``start`` before anything is
  made; the last ``release`` deletes it. A renewal that finds the Lease gone creates it again.
* Times are the API server's: the ``Date`` header of each reply gives the offset of the local
  clock, so ``renewTime`` is written, and judged by ``gc`` on another host, on one clock: a laptop
  whose clock is off does not make its lease look expired or fresh.
* ``owner_state`` is ``gc``'s rule. An owner on this host is alive while its process runs
  (``openenv.interfaces.owner_alive``). An owner on another host is alive while the Lease its
  objects name (annotation ``openenv.org/owner-lease``) exists, is held by that owner, and
  ``renewTime + leaseDurationSeconds`` is not past. Objects of another host that name no lease
  (made before leases existed) are kept: there is no way to know.
* A Lease the API server could not delete (it was gone) is queued; ``retry_deletions`` (called by
  every provider call that retries deletions) tries again, unless the owner holds it again.
"""

from __future__ import annotations

import email.utils
import hashlib
import logging
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from openenv.interfaces import owner_alive, owner_id
from openenv_provider_kubernetes.cluster import reraise, status_of
from openenv_provider_kubernetes.naming import (
    ANNOTATION_OWNER,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_PROVIDER,
    PROVIDER,
    label_value,
)

if TYPE_CHECKING:
    from openenv_provider_kubernetes.cluster import Cluster

__all__ = [
    "ANNOTATION_LEASE",
    "DEFAULT_DURATION_S",
    "LABEL_ROLE",
    "LeaseInfo",
    "OwnerLease",
    "delete_lease",
    "hold",
    "lease_name",
    "lease_text",
    "owner_state",
    "read_leases",
    "retry_deletions",
    "server_now",
]

log = logging.getLogger("openenv.provider.kubernetes")

DEFAULT_DURATION_S = 60
LABEL_ROLE = "openenv.org/role"
ROLE_OWNER_LEASE = "owner-lease"
#: On every Pod and Service: the name of the owner's Lease (what ``gc`` on another host checks).
ANNOTATION_LEASE = "openenv.org/owner-lease"
_API_TIMEOUT = (5, 30)
#: Local clock minus the API server's, per server, from the Date header of the last reply.
_OFFSETS: dict[str, float] = {}
_LOCK = threading.RLock()
_KEEPERS: dict[tuple[str, str, str], OwnerLease] = {}
_UNDELETED: list[tuple[Cluster, str]] = []


def lease_name(owner: str) -> str:
    return f"openenv-owner-{hashlib.sha256(owner.encode()).hexdigest()[:20]}"


def _coordination(cluster: Cluster) -> Any:
    from kubernetes import client

    return client.CoordinationV1Api(cluster.api_client)


def _observe(server: str, headers: Any) -> None:
    """Note the API server's clock from a reply's ``Date`` header (1 s resolution: its middle)."""
    date = (headers or {}).get("Date") or (headers or {}).get("date")
    if not date:
        return
    try:
        theirs = email.utils.parsedate_to_datetime(date).timestamp() + 0.5
    except (TypeError, ValueError):
        return
    _OFFSETS[server] = time.time() - theirs


def server_now(server: str) -> datetime:
    """Now on the API server's clock (the local clock until a reply was seen)."""
    return datetime.fromtimestamp(time.time() - _OFFSETS.get(server, 0.0), UTC)


def _micro(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseInfo:
    """One owner Lease as ``gc``/``ps`` judge it."""

    name: str
    holder: str
    renew_time: datetime | None
    duration_s: int | None

    def expires(self) -> datetime | None:
        if self.renew_time is None or not self.duration_s:
            return None
        return self.renew_time + timedelta(seconds=self.duration_s)

    def expired(self, now: datetime) -> bool:
        expires = self.expires()
        return expires is None or now >= expires


def read_leases(cluster: Cluster) -> tuple[dict[str, LeaseInfo], datetime]:
    """The provider's owner Leases of the namespace by name, and now on the API server's clock."""
    try:
        items, _, headers = _coordination(cluster).list_namespaced_lease_with_http_info(
            cluster.namespace, label_selector=f"{LABEL_MANAGED}=true,{LABEL_ROLE}={ROLE_OWNER_LEASE}",
            _request_timeout=_API_TIMEOUT)
    except Exception as exc:
        reraise(exc, doing=f"listing leases in namespace {cluster.namespace}", server=cluster.server)
    _observe(cluster.server, headers)
    leases = {}
    for lease in items.items:
        spec = lease.spec
        renew = spec.renew_time if spec is not None else None
        if renew is not None and renew.tzinfo is None:
            renew = renew.replace(tzinfo=UTC)
        leases[lease.metadata.name] = LeaseInfo(
            name=lease.metadata.name, holder=(spec.holder_identity if spec is not None else None) or "",
            renew_time=renew, duration_s=spec.lease_duration_seconds if spec is not None else None)
    return leases, server_now(cluster.server)


def _ago(now: datetime, then: datetime) -> str:
    return f"{max(0, round((now - then).total_seconds()))}s ago"


def lease_text(lease: LeaseInfo | None, now: datetime) -> str:
    if lease is None:
        return "lease missing"
    if lease.renew_time is None:
        return "lease never renewed"
    if lease.expired(now):
        expires = lease.expires()
        return f"lease expired {_ago(now, expires) if expires else ''}".rstrip()
    return f"lease live, renewed {_ago(now, lease.renew_time)}"


def owner_state(owner: str, lease: str | None, leases: dict[str, LeaseInfo], now: datetime) -> tuple[bool, str]:
    """``(alive, what is known)`` for the owner of an object naming the Lease ``lease``."""
    parts = owner.split(":")
    if len(parts) != 3:
        return False, f"owner {owner!r} unreadable"
    host = parts[0]
    info = leases.get(lease) if lease else None
    if info is not None and info.holder != owner:
        info = None  # not this owner's lease: as good as none
    if host == socket.gethostname():
        alive = owner_alive(owner)
        known = "no lease" if lease is None else lease_text(info, now)
        return alive, f"owner on this host {'running' if alive else 'gone'}, {known}"
    if lease is None:
        return True, f"owner on {host}, no lease (made before owner leases), kept"
    return info is not None and not info.expired(now), f"owner on {host}, {lease_text(info, now)}"


class OwnerLease:
    """The Lease of one owner process in one namespace; see the module docstring."""

    def __init__(self, cluster: Cluster, owner: str) -> None:
        self.cluster = cluster
        self.owner = owner
        self.name = lease_name(owner)
        self.duration_s = 0
        self.holders = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Whether the Lease was ever written (else the last release has nothing to delete).
        self._written = False

    @property
    def _key(self) -> tuple[str, str, str]:
        return (self.cluster.server, self.cluster.namespace, self.owner)

    def _body(self, now: datetime, *, create: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"holderIdentity": self.owner, "leaseDurationSeconds": self.duration_s,
                                "renewTime": _micro(now)}
        if not create:
            return {"spec": spec}
        labels = {LABEL_MANAGED: "true", LABEL_PROVIDER: PROVIDER, LABEL_OWNER: label_value(self.owner),
                  LABEL_ROLE: ROLE_OWNER_LEASE}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "labels": labels, "annotations": {ANNOTATION_OWNER: self.owner}},
                "spec": {**spec, "acquireTime": _micro(now)}}

    def _write(self, *, first: bool = False) -> None:
        """Create the Lease (``first``) or renew it; either falls back to the other when the Lease
        is (not) there already. Times are on the API server's clock."""
        api, ns, server = _coordination(self.cluster), self.cluster.namespace, self.cluster.server

        def create() -> Any:
            return api.create_namespaced_lease_with_http_info(
                ns, self._body(server_now(server), create=True), _request_timeout=_API_TIMEOUT)

        def renew() -> Any:
            return api.patch_namespaced_lease_with_http_info(
                self.name, ns, self._body(server_now(server), create=False), _request_timeout=_API_TIMEOUT)

        attempts, fallback_status = ((create, renew), 409) if first else ((renew, create), 404)
        doing = f"{'creating' if first else 'renewing'} the owner lease {ns}/{self.name}"
        try:
            try:
                _, _, headers = attempts[0]()
            except Exception as exc:
                if status_of(exc) != fallback_status:
                    raise
                _observe(server, getattr(exc, "headers", None))
                _, _, headers = attempts[1]()
        except Exception as exc:
            reraise(exc, doing=doing, server=server)
        self._written = True
        _observe(server, headers)

    def _ensure(self, duration_s: int) -> None:
        with self._lock:
            grown = duration_s > self.duration_s
            self.duration_s = max(self.duration_s, duration_s)
            if self._thread is None:
                self._write(first=True)
                if abs(_OFFSETS.get(self.cluster.server, 0.0)) > 1.0:
                    self._write()  # the first write was stamped before the server's clock was known
                self._stop.clear()
                self._thread = threading.Thread(target=self._renew_loop, name=f"k8s-lease-{self.name}", daemon=True)
                self._thread.start()
            elif grown:
                self._write()

    def _renew_loop(self) -> None:
        while not self._stop.wait(max(1.0, self.duration_s / 3)):
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self._write()
                except Exception as exc:  # the API server away: the lease expires, as it should then
                    log.warning("could not renew the owner lease %s/%s: %s", self.cluster.namespace, self.name, exc)

    def release(self) -> None:
        """One holder fewer; the last one stops the renewals and deletes the Lease."""
        with _LOCK:
            self.holders -= 1
            if self.holders > 0:
                return
            _KEEPERS.pop(self._key, None)
            with self._lock:
                self._stop.set()
                self._thread = None
                self.duration_s = 0
                if self._written and not delete_lease(self.cluster, self.name):
                    _UNDELETED.append((self.cluster, self.name))


def delete_lease(cluster: Cluster, name: str) -> bool:
    """Delete the Lease ``name``; ``False`` when the API server did not answer (worth a retry).
    A refusal is logged and not retried: the Lease expires by itself and ``gc`` removes it."""
    from openenv_provider_kubernetes.cluster import KubernetesUnavailable, api_error

    try:
        reply = _coordination(cluster).delete_namespaced_lease(name, cluster.namespace, _request_timeout=_API_TIMEOUT,
                                                               _preload_content=False)
        reply.read()
        reply.release_conn()
    except Exception as exc:
        if status_of(exc) == 404:
            return True
        mapped = api_error(exc, doing=f"deleting the owner lease {cluster.namespace}/{name}", server=cluster.server)
        log.warning("could not delete the owner lease %s/%s (%s); it expires by itself, and `gc` removes it",
                    cluster.namespace, name, mapped)
        return not isinstance(mapped, KubernetesUnavailable)
    return True


def hold(cluster: Cluster, duration_s: int) -> OwnerLease:
    """Hold this process's Lease in ``cluster``'s namespace (created now if it is the first hold)."""
    owner = owner_id()
    with _LOCK:
        key = (cluster.server, cluster.namespace, owner)
        keeper = _KEEPERS.get(key)
        if keeper is None:
            keeper = _KEEPERS[key] = OwnerLease(cluster, owner)
            # Held again: a queued deletion of it must not remove the live one later.
            _UNDELETED[:] = [(c, n) for c, n in _UNDELETED
                             if (c.server, c.namespace, n) != (cluster.server, cluster.namespace, keeper.name)]
        keeper.holders += 1
        try:
            keeper._ensure(duration_s)
        except BaseException:
            keeper.release()
            raise
    return keeper


def retry_deletions() -> int:
    """Try the queued Lease deletions again; returns how many are still queued."""
    with _LOCK:
        todo, _UNDELETED[:] = list(_UNDELETED), []
        for cluster, name in todo:
            if not delete_lease(cluster, name):
                _UNDELETED.append((cluster, name))
        return len(_UNDELETED)
