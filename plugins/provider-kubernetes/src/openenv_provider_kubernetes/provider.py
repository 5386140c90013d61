"""The ``kubernetes`` provider: one hardened Pod (plus a ClusterIP Service) per env server.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), beyond the interface's:

* ``start`` creates the Pod (``manifests.pod_body``: hardened, requests/limits, owner labels) and
  its Service, watches the Pod until ``Ready`` (``pods.wait_scheduled_ready``), opens the access
  path and returns once it is ready. Access is a port-forward through the API server exposed on
  ``127.0.0.1:<free port>`` (``forward``) — what a trainer outside the cluster needs; then ready
  means the server passed ``openenv.readiness`` through the forward — or (``access="service"``,
  the in-cluster default) the Service URL ``http://<name>.<namespace>.svc:8000``; then ready means
  the Pod's ``Ready`` condition (the kubelet's readinessProbe, ``GET /health``) and the Service's
  Endpoints listing the Pod as a ready address (``pods.wait_endpoint_ready``): the URL itself is
  never probed from the provider's process, which may be outside the cluster (it would not
  resolve there). ``access="service"`` with ``service=False`` is refused before anything is made.
* A Pod that can never become ready (bad image, crash, refused config) fails ``start`` at once
  with its state, events and log tail; any failure (a timeout, Ctrl-C, the API server going away)
  deletes what was created before re-raising. When the API server is gone, the deletion is retried
  (bounded) and, if it still cannot be done, queued: retried by every later call of this process
  and at exit; a process that dies meanwhile leaves the objects to ``gc``.
* ``stop`` is idempotent: closes the forward, deletes the Pod (SIGTERM, SIGKILL after
  ``timeout_s``) and the Service, and waits (bounded) until the Pod is gone, so ``ps`` no longer
  shows it. Handles still live at interpreter exit are stopped by an ``atexit`` hook.
* Every launch holds the process's owner Lease (``lease``: created before the first object,
  renewed by a thread, deleted with the last), and its Pod and Service name it (annotation
  ``openenv.org/owner-lease``).
* ``ps``/``gc`` select by the provider's labels only (``naming``). ``gc`` on any host deletes the
  Pods and Services whose owner (annotation ``openenv.org/owner``) is gone — a process of this
  host that no longer runs, or an owner on another host whose Lease is missing or expired — and
  the Leases of owners found gone; ``ps`` shows each Pod's owner host and lease state in ``status``.
* ``options['warm_pool']=N`` keeps N ready servers for that spec (``pool.WarmPool``): ``start`` takes
  one (and a replacement is started in the background).
* Refusals name their cause (``cluster.api_error``): the RBAC rule missing, the quota exceeded, the
  API server that does not answer.
"""

from __future__ import annotations

import atexit
import builtins
import logging
import math
import threading
import time
import uuid
import weakref
from dataclasses import replace
from typing import Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle, owner_id
from openenv.readiness import wait_until_ready
from openenv_provider_kubernetes.cluster import Cluster, KubernetesUnavailable, connect, reraise, status_of
from openenv_provider_kubernetes.deletion import (
    API_TIMEOUT,
    DISCARD_RETRY_S,
    core_api,
    delete_object,
    delete_or_queue,
    retry_pending,
)
from openenv_provider_kubernetes.forward import PortForward
from openenv_provider_kubernetes.lease import (
    ANNOTATION_LEASE,
    OwnerLease,
    delete_lease,
    hold,
    owner_state,
    read_leases,
)
from openenv_provider_kubernetes.manifests import manifest_extras, pod_body, resolve_image, service_body
from openenv_provider_kubernetes.naming import (
    ANNOTATION_OWNER,
    LABEL_ENV,
    SERVER_PORT,
    managed_labels,
    object_name,
    selector,
)
from openenv_provider_kubernetes.options import KubeOptions, parse_options
from openenv_provider_kubernetes.pods import describe, diagnostics, wait_endpoint_ready, wait_scheduled_ready

__all__ = ["KubernetesHandle", "KubernetesProvider"]

log = logging.getLogger("openenv.provider.kubernetes")
_LIVE: weakref.WeakSet[KubernetesHandle] = weakref.WeakSet()
class KubernetesHandle(ProviderHandle):
    """A running env server Pod; ``base_url`` is the local port-forward (or the Service URL)."""

    provider = "kubernetes"
    exit_stop_timeout_s: ClassVar[float] = 2.0

    def __init__(self, cluster: Cluster, *, name: str, env: str, token: str | None, service: bool,
                 port: int, lease: OwnerLease | None = None) -> None:
        # Built before the Pod exists (so a failed launch can clean it up); ProviderHandle's keyword
        # constructor needs a base URL, which the port-forward only gives once the Pod runs, so the
        # fields are set here and start() returns the handle only after base_url is set.
        self.id = name
        self.name = name
        self.namespace = cluster.namespace
        self.env = env
        self.base_url = ""
        #: For ``host_port`` Pods on a local node: the server's own address (the benchmark's "direct").
        self.direct_url: str | None = None
        self._cluster = cluster
        self._core = core_api(cluster)
        self._token = token
        self._service = service
        self._port = port
        self._forward: PortForward | None = None
        self._lock = threading.Lock()
        self._stopped = False
        #: The owner Lease this handle holds until it is stopped (``lease``).
        self._lease = lease
        _LIVE.add(self)

    # -- access -----------------------------------------------------------------------------------

    def open_forward(self) -> None:
        self._forward = PortForward(self._cluster.api_client.configuration, self.namespace, self.name, self._port)
        self.base_url = self._forward.base_url

    def use_service_url(self) -> None:
        self.base_url = f"http://{self.name}.{self.namespace}.svc:{SERVER_PORT}"

    @property
    def forward(self) -> PortForward | None:
        return self._forward

    # -- state ------------------------------------------------------------------------------------

    def _read(self) -> Any | None:
        try:
            return self._core.read_namespaced_pod(self.name, self.namespace, _request_timeout=API_TIMEOUT)
        except Exception as exc:
            if status_of(exc) == 404:
                return None
            reraise(exc, doing=f"reading the Pod {self.namespace}/{self.name}",
                            server=self._cluster.server)

    def _exited(self) -> str | None:
        if self._forward is not None and self._forward.refused is not None:
            raise self._forward.refused  # the API server refuses the port-forward: waiting cannot help
        pod = self._read()
        if pod is None:
            return "was deleted"
        state, final = describe(pod)
        if final:
            return f"stopped ({state}).{diagnostics(self._core, self.namespace, self.name)}"
        return None

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, exited=self._exited,
                         log_tail=lambda: self.logs(50), what=f"Pod {self.namespace}/{self.name}",
                         max_interval_s=0.25)

    def is_running(self) -> bool:
        if self._stopped:
            return False
        pod = self._read()
        if pod is None or pod.metadata.deletion_timestamp is not None or pod.status.phase != "Running":
            return False
        return any(s.state is not None and s.state.running is not None
                   for s in pod.status.container_statuses or [])

    def logs(self, tail: int = 50) -> str:
        try:
            text = self._core.read_namespaced_pod_log(self.name, self.namespace, tail_lines=max(0, tail),
                                                      _request_timeout=API_TIMEOUT)
        except Exception:
            return ""
        return str(text or "").rstrip("\n")

    # -- stop -------------------------------------------------------------------------------------

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop(grace_s=max(0, math.ceil(timeout_s)), retry_s=timeout_s)

    def discard(self) -> None:
        """Stop a server nobody used (a failed launch, a refill after the pool closed): no grace period,
        but the deletion is retried for a while when the API server is slow to answer (a loaded
        cluster), instead of being queued until this process exits."""
        self._stop(grace_s=0, retry_s=DISCARD_RETRY_S)

    def _stop(self, *, grace_s: int, retry_s: float) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            if self._forward is not None:
                self._forward.close()
            delete_or_queue(self._cluster, "pod", self.namespace, self.name, grace_s=grace_s, retry_s=retry_s)
            if self._service:
                delete_or_queue(self._cluster, "service", self.namespace, self.name, grace_s=None,
                                 retry_s=retry_s)
            self._wait_gone(grace_s + 15.0)
        finally:
            _LIVE.discard(self)
            if self._lease is not None:
                self._lease.release()

    def _wait_gone(self, bound_s: float) -> None:
        deadline = time.monotonic() + bound_s
        forced = False
        while time.monotonic() < deadline:
            try:
                if self._read() is None:
                    return
            except KubernetesUnavailable:
                return  # queued for later; nothing more to wait for now
            if not forced and time.monotonic() > deadline - 10.0:
                forced = True
                delete_or_queue(self._cluster, "pod", self.namespace, self.name, grace_s=0, retry_s=0)
            time.sleep(0.2)
        log.warning("Pod %s/%s still terminating after %.0fs", self.namespace, self.name, bound_s)

    def __repr__(self) -> str:
        return f"KubernetesHandle(name={self.name!r}, namespace={self.namespace!r}, base_url={self.base_url!r})"


class KubernetesProvider(Provider):
    """Starts env servers as hardened Pods; see the module docstring for the promises.

    The constructor's arguments are defaults for ``LaunchSpec.options`` of the same names, and
    select where ``ps``/``gc`` look.
    """

    requires: ClassVar[str] = ("a Kubernetes cluster (a kubeconfig) and an env image: its own tests run the "
                               "contract on the cluster of .ci/k8s-setup.sh (plugins/provider-kubernetes/tests)")

    name: ClassVar[str] = "kubernetes"

    def __init__(self, *, namespace: str | None = None, context: str | None = None,
                 kubeconfig: str | None = None, in_cluster: bool | None = None) -> None:
        self._defaults: dict[str, Any] = {k: v for k, v in (
            ("namespace", namespace), ("context", context), ("kubeconfig", kubeconfig),
            ("in_cluster", in_cluster)) if v is not None}
        self._clusters: dict[tuple[Any, ...], Cluster] = {}
        self._lock = threading.Lock()
        self._pools: dict[str, Any] = {}

    # -- configuration ----------------------------------------------------------------------------

    def options(self, spec: LaunchSpec) -> KubeOptions:
        return parse_options({**self._defaults, **spec.options})

    def cluster(self, opts: KubeOptions | None = None) -> Cluster:
        """The connected cluster for ``opts`` (the provider's defaults when ``None``)."""
        opts = opts or parse_options(self._defaults)
        key = (*opts.connection_key(), opts.namespace)
        with self._lock:
            if key not in self._clusters:
                self._clusters[key] = connect(opts)
            return self._clusters[key]

    # -- start ------------------------------------------------------------------------------------

    def start(self, spec: LaunchSpec) -> KubernetesHandle:
        opts = self.options(spec)
        retry_pending()
        if opts.warm_pool > 0:
            return self._pool(spec, opts).acquire(spec.startup_timeout_s)
        return self.launch(spec, opts)

    def _pool(self, spec: LaunchSpec, opts: KubeOptions) -> Any:
        from openenv_provider_kubernetes.pool import WarmPool, pool_key

        key = pool_key(spec)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                cold = replace(spec, options={**spec.options, "warm_pool": 0})
                pool = self._pools[key] = WarmPool(self, cold, size=opts.warm_pool)
            return pool

    def close_pools(self) -> None:
        """Stop every idle server of the warm pools (handles already acquired stay with their users)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        # A deletion the API server did not take in time was queued: retry it now (bounded), so that
        # closing the pools leaves nothing behind on a slow cluster either.
        deadline = time.monotonic() + DISCARD_RETRY_S
        while retry_pending() and time.monotonic() < deadline:
            time.sleep(0.5)

    def launch(self, spec: LaunchSpec, opts: KubeOptions) -> KubernetesHandle:
        """Start one server now (no pool)."""
        cluster = self.cluster(opts)
        core = core_api(cluster)
        ns = cluster.namespace
        image = resolve_image(spec)
        name = object_name(image.env, uuid.uuid4().hex[:10])
        owner = owner_id()
        labels = managed_labels(owner=owner, env=image.env, instance=name, extra=opts.labels)
        pod = pod_body(name=name, spec=spec, opts=opts, image=image, labels=labels, owner=owner,
                       extras=manifest_extras(image.env) if image.built else {})
        port = opts.host_port or SERVER_PORT
        access = opts.access or ("service" if cluster.in_cluster else "port-forward")
        if access == "service" and not opts.service:
            raise ConfigError(f"access='service'{'' if opts.access else ' (the in-cluster default)'} needs "
                              "the Service, but options['service'] is False: drop it, or pass "
                              "access='port-forward'.")
        deadline = time.monotonic() + spec.startup_timeout_s
        created: list[str] = []
        handle: KubernetesHandle | None = None
        # The owner Lease exists before the objects do, so gc on another host never sees them
        # without it; a refusal (RBAC) fails here, before anything else is made.
        lease = hold(cluster, opts.lease_duration_s)
        pod["metadata"]["annotations"][ANNOTATION_LEASE] = lease.name
        service = service_body(name=name, labels=labels, owner=owner, port=port)
        service["metadata"]["annotations"][ANNOTATION_LEASE] = lease.name
        try:
            for kind, body, made in (("pod", pod, True), ("service", service, opts.service)):
                if not made:
                    continue
                try:
                    self._create(cluster, kind, body, f"creating the {kind.title()} {ns}/{name}")
                except KubernetesUnavailable:
                    # The reply was lost (a timeout on a loaded cluster): the API server may still have
                    # committed the object, so it is deleted too (a 404 there is harmless).
                    created.append(kind)
                    raise
                created.append(kind)
            handle = KubernetesHandle(cluster, name=name, env=image.env, token=spec.token, service=opts.service,
                                      port=port, lease=lease)
            try:
                wait_scheduled_ready(core, ns, name, deadline)
            except Exception as exc:
                reraise(exc, doing=f"waiting for the Pod {ns}/{name}", server=cluster.server)
            if opts.host_port is not None:
                handle.direct_url = f"http://127.0.0.1:{opts.host_port}"
            if access == "service":
                # Readiness without reaching the URL (from here it may not resolve, nor route):
                # the Pod's Ready condition (the kubelet's readinessProbe, GET /health) was awaited
                # above; now the Endpoints must list the Pod, as kube-proxy routes from them.
                handle.use_service_url()
                try:
                    wait_endpoint_ready(core, ns, name, port, deadline, handle._exited)
                except Exception as exc:
                    reraise(exc, doing=f"waiting for the endpoints of the Service {ns}/{name}",
                            server=cluster.server)
            else:
                handle.open_forward()
                handle.wait_ready(max(1.0, deadline - time.monotonic()))
            return handle
        except BaseException:
            try:
                if handle is not None:
                    handle.discard()
                else:
                    for kind in created:
                        delete_or_queue(cluster, kind, ns, name, grace_s=0, retry_s=DISCARD_RETRY_S)
            except Exception as exc:  # e.g. RBAC refuses the delete: the launch's own error is the one to raise
                log.warning("could not delete %s/%s after a failed start (%s); `openenv providers gc` removes it",
                            ns, name, exc)
            finally:
                if handle is None:
                    lease.release()  # a handle releases its lease itself when stopped
            raise

    def _create(self, cluster: Cluster, kind: str, body: dict[str, Any], doing: str) -> None:
        core = core_api(cluster)
        try:
            if kind == "pod":
                core.create_namespaced_pod(cluster.namespace, body, _request_timeout=API_TIMEOUT)
            else:
                core.create_namespaced_service(cluster.namespace, body, _request_timeout=API_TIMEOUT)
        except Exception as exc:
            if status_of(exc) == 404:
                raise KubernetesUnavailable(
                    f"namespace {cluster.namespace!r} does not exist on {cluster.server} ({doing}). Create it, or "
                    "choose another with options['namespace'] / $OPENENV_K8S_NAMESPACE.") from None
            reraise(exc, doing=doing, server=cluster.server)

    # -- ps / gc ----------------------------------------------------------------------------------

    def _objects(self, kind: str, owner: str | None) -> builtins.list[Any]:
        cluster = self.cluster()
        core = core_api(cluster)
        try:
            if kind == "pod":
                return list(core.list_namespaced_pod(cluster.namespace, label_selector=selector(owner),
                                                     _request_timeout=API_TIMEOUT).items)
            return list(core.list_namespaced_service(cluster.namespace, label_selector=selector(owner),
                                                     _request_timeout=API_TIMEOUT).items)
        except Exception as exc:
            reraise(exc, doing=f"listing {kind}s in namespace {cluster.namespace}",
                            server=cluster.server)

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """The Pods (this owner's, or everyone's); ``status`` is the phase, then the owner's host and
        lease state, e.g. ``running; owner on laptop-7, lease live, renewed 4s ago``."""
        retry_pending()
        live = {h.name: h for h in list(_LIVE)}
        pods = self._objects("pod", None if all_owners else owner_id())
        leases, now = read_leases(self.cluster())
        infos = []
        for pod in pods:
            name = pod.metadata.name
            annotations = pod.metadata.annotations or {}
            owner = annotations.get(ANNOTATION_OWNER, "")
            phase = "terminating" if pod.metadata.deletion_timestamp else str(pod.status.phase or "Unknown").lower()
            _, known = owner_state(owner, annotations.get(ANNOTATION_LEASE), leases, now)
            handle = live.get(name)
            infos.append(HandleInfo(
                provider=self.name, id=name, owner=owner,
                base_url=handle.base_url if handle is not None and handle.base_url else None,
                status=f"{phase}; {known}", env=(pod.metadata.labels or {}).get(LABEL_ENV) or None))
        return infos

    def gc(self) -> builtins.list[HandleInfo]:
        """Delete the Pods and Services whose owner is gone (``lease.owner_state``: a process of this
        host that no longer runs, or an owner on another host whose Lease is missing or expired),
        then the owner Leases of owners found gone."""
        retry_pending()
        cluster = self.cluster()
        objects = {kind: self._objects(kind, None) for kind in ("pod", "service")}
        leases, now = read_leases(cluster)
        removed: builtins.list[HandleInfo] = []
        for kind, found in objects.items():
            for obj in found:
                annotations = obj.metadata.annotations or {}
                owner = annotations.get(ANNOTATION_OWNER, "")
                alive, known = owner_state(owner, annotations.get(ANNOTATION_LEASE), leases, now)
                if alive:
                    continue
                try:
                    delete_object(cluster, kind, cluster.namespace, obj.metadata.name,
                                  grace_s=0 if kind == "pod" else None)
                except Exception as exc:
                    log.warning("gc: could not delete %s %s: %s", kind, obj.metadata.name, exc)
                    continue
                if kind == "pod":
                    removed.append(HandleInfo(provider=self.name, id=obj.metadata.name, owner=owner,
                                              status=f"removed; {known}",
                                              env=(obj.metadata.labels or {}).get(LABEL_ENV) or None))
        for lease in leases.values():
            if not owner_state(lease.holder, lease.name, leases, now)[0] and not delete_lease(cluster, lease.name):
                log.warning("gc: could not delete the owner lease %s", lease.name)
        return removed


@atexit.register
def stop_live_handles() -> None:
    """Stop what this process still runs when it exits normally (SIGKILL leaves it to gc)."""
    for handle in builtins.list(_LIVE):
        try:
            handle.stop(timeout_s=handle.exit_stop_timeout_s)
        except Exception as exc:  # at exit there is no one to raise to
            log.warning("could not stop %r at exit: %s", handle, exc)
    retry_pending()
