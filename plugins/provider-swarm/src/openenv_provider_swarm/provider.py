"""The ``swarm`` provider: env servers as Docker Swarm services, with host-mode published ports.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), beyond the interface's:

* Ports are published in **host mode**, never through the routing mesh: each task binds its own
  port on its node and the client talks straight to it. The host port is left to the engine
  (no ``PublishedPort``): Swarm then picks a free port per task when it starts the task and
  reports it in the task's status, which is race-free, and lets several replicas share a node.
  Pinning a port (``options["published_port"]``) is possible but can race with other programs
  and limits a node to one replica. The published address comes from the engine's default bind
  address: start ``dockerd --ip 127.0.0.1`` (as ``.ci/docker-setup.sh`` does) to keep it on
  loopback; a wider binding is logged as a warning.
* The same images, options, labels and hardening as the docker provider, as far as Swarm's API
  has them: capabilities dropped, read-only root with a tmpfs ``/tmp``, memory/CPU/pids limits,
  an init, a per-owner overlay network; ``no-new-privileges`` needs API 1.44 (Docker 25) and is
  set when the engine has it. Secrets go only into the service's environment.
* ``start`` returns when ``replicas`` tasks run and each passed ``/health`` plus a ``/ws``
  round-trip; ``handle.urls`` lists them (``base_url`` is the first). A task that fails, is
  rejected or exits during start-up is reported at once with the service's log tail, and every
  failure removes the service before re-raising.
* ``handle.scale(n)`` changes the replica count and waits until ``n`` tasks are ready.
* ``stop`` removes the service, waits up to ``timeout_s`` for its containers to go, force-removes
  any left, and releases the network; idempotent. ``gc`` removes services (and their containers
  and networks) whose owner process is gone.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import math
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, owner_alive, owner_id
from openenv.readiness import NotReady, ProbeFailed, log_tail_text, probe
from openenv_provider_docker.base import EngineHandle, EngineProvider, port_bindings, remove_container
from openenv_provider_docker.engine import EngineUnavailable, api_version_at_least, connect, not_found
from openenv_provider_docker.images import ResolvedImage, server_command, server_environment
from openenv_provider_docker.naming import CONTAINER_PORT, LABEL_ENV, LABEL_OWNER, label_filters, resource_name
from openenv_provider_docker.options import ContainerOptions, parse_memory, parse_options
from openenv_provider_docker.sandboxing import identity

if TYPE_CHECKING:
    import docker
    from docker.models.services import Service

__all__ = ["NotASwarmManager", "SwarmHandle", "SwarmProvider"]

log = logging.getLogger("openenv.provider.swarm")

_FAILED_STATES = ("failed", "rejected", "complete", "orphaned")
_SERVICE_LABEL = "com.docker.swarm.service.id"
_TASK_LABEL = "com.docker.swarm.task.id"
#: Task states in which the task's container may not exist yet.
_PRE_CONTAINER_STATES = ("new", "allocated", "pending", "assigned", "accepted", "preparing", "ready")
#: How long a removed service's not-yet-created containers are waited for.
_PENDING_WAIT_S = 5.0
_warned_wide_bind = False


def _task_port(task: dict[str, Any]) -> int | None:
    ports = ((task.get("Status") or {}).get("PortStatus") or {}).get("Ports") or []
    for port in ports:
        if port.get("TargetPort") == CONTAINER_PORT and port.get("PublishedPort"):
            return int(port["PublishedPort"])
    return None


class SwarmHandle(EngineHandle):
    """A Swarm service serving one env; ``urls`` has one base URL per ready replica."""

    provider = "swarm"
    exit_stop_timeout_s: ClassVar[float] = 5.0
    # Swarm detaches a removed task's endpoint from the overlay network a moment after its container
    # is gone, so the network's removal is retried that long.
    network_retry_s: ClassVar[float] = 5.0

    def __init__(self, client: docker.DockerClient, service: Service, *, env: str,
                 token: str | None, network: str | None, replicas: int,
                 startup_timeout_s: float = 60.0) -> None:
        self._service = service
        self._node_addr: dict[str, str] = {}
        self.replicas = replicas
        self.urls: list[str] = []
        super().__init__(client, service, env=env, token=token, network=network,
                         startup_timeout_s=startup_timeout_s)

    def _begin(self, timeout_s: float) -> str:
        """Wait for the first replica: a service has an address only once a task serves."""
        self._await_replicas(1, timeout_s)
        return self.urls[0]

    # -- tasks and readiness ----------------------------------------------------------------------

    def _tasks(self) -> list[dict[str, Any]]:
        return self._client.api.tasks(filters={"service": self.id})

    def _address(self, node_id: str) -> str:
        if node_id not in self._node_addr:
            addr = "127.0.0.1"
            try:
                addr = self._client.nodes.get(node_id).attrs.get("Status", {}).get("Addr") or addr
            except Exception as exc:
                log.debug("node %s address unknown (%s); using 127.0.0.1", node_id, exc)
            self._node_addr[node_id] = "127.0.0.1" if addr in ("0.0.0.0", "") else addr
        return self._node_addr[node_id]

    def _await_replicas(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` running tasks answer the readiness probe; fail fast on a dead task."""
        deadline = time.monotonic() + timeout_s
        ready: dict[str, str] = {}
        known_failed = {t["ID"] for t in self._tasks() if t["Status"]["State"] in _FAILED_STATES}
        reason = "no task scheduled yet"
        delay = 0.05
        while True:
            tasks = self._tasks()
            for task in tasks:
                state = task["Status"]["State"]
                if state in _FAILED_STATES and task["ID"] not in known_failed:
                    err = task["Status"].get("Err") or task["Status"].get("Message") or state
                    exit_code = (task["Status"].get("ContainerStatus") or {}).get("ExitCode")
                    code = f" (exit code {exit_code})" if exit_code is not None else ""
                    raise RuntimeError(f"service {self.name}: task {task['ID'][:12]} {state} during "
                                       f"start-up: {err}{code}.{self._tail_text()}")
            running = [t for t in tasks if t["Status"]["State"] == "running"
                       and t.get("DesiredState") == "running"]
            for task in running:
                port = _task_port(task)
                if task["ID"] in ready or port is None:
                    continue
                url = f"http://{self._address(task['NodeID'])}:{port}"
                remaining = max(0.2, min(5.0, deadline - time.monotonic()))
                try:
                    probe(url, token=self._token, timeout_s=remaining)
                except NotReady as exc:
                    reason = f"{url}: {exc}"
                    continue
                except ProbeFailed as exc:
                    raise RuntimeError(f"service {self.name} answers but cannot serve: {exc}."
                                       f"{self._tail_text()}") from None
                ready[task["ID"]] = url
                self._check_binding(task, port)
            live_ids = {t["ID"] for t in running}
            urls = [url for task_id, url in ready.items() if task_id in live_ids]
            if len(urls) >= count:
                self.urls = sorted(urls)
                self.base_url = self.urls[0]
                return
            if not running:
                reason = f"{len(tasks)} task(s), none running yet"
            if time.monotonic() >= deadline:
                raise TimeoutError(f"service {self.name}: {len(urls)}/{count} replicas ready after "
                                   f"{timeout_s:g}s (last check: {reason}).{self._tail_text()}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

    def _check_binding(self, task: dict[str, Any], port: int) -> None:
        """Warn once if a task's port is published beyond loopback (engine default bind address)."""
        global _warned_wide_bind
        if _warned_wide_bind:
            return
        container_id = ((task["Status"].get("ContainerStatus") or {}).get("ContainerID")) or ""
        try:
            attrs = self._client.api.inspect_container(container_id)
        except Exception:
            return  # on another node: nothing to check from here
        if any(b.get("HostIp") not in ("127.0.0.1", "::1") for b in port_bindings(attrs)):
            _warned_wide_bind = True
            log.warning("Swarm published port %s on every interface (Swarm host-mode ports use the "
                        "engine's default bind address). Start dockerd with --ip 127.0.0.1 to keep "
                        "env servers on loopback, or firewall the port range.", port)

    def wait_ready(self, timeout_s: float) -> None:
        self._await_replicas(self.replicas, timeout_s)

    def scale(self, replicas: int, timeout_s: float = 60.0) -> list[str]:
        """Run ``replicas`` tasks (at least 1); return once that many are ready. Returns the URLs."""
        if not isinstance(replicas, int) or replicas < 1:
            raise ConfigError(f"scale({replicas!r}): the replica count must be an integer ≥ 1; "
                              "stop() the handle to remove the service.")
        if self._stopped:
            raise RuntimeError(f"service {self.name} was stopped; start a new one.")
        api = self._client.api
        current = api.inspect_service(self.id)
        spec = current["Spec"]
        spec["Mode"] = {"Replicated": {"Replicas": replicas}}
        # The spec goes back byte-for-byte except for the mode. The SDK's Service.scale() and
        # update_service() rebuild the task template (adding empty DNSConfig/Placement), which
        # Swarm takes as a changed template and answers by replacing every running task.
        response = api._post_json(api._url("/services/{0}/update", self.id), data=spec,
                                  params={"version": current["Version"]["Index"]})
        api._raise_for_status(response)
        self.replicas = replicas
        self._await_replicas(replicas, timeout_s)
        return list(self.urls)

    # -- the service --------------------------------------------------------------------------------

    def _running(self) -> bool:
        return any(t["Status"]["State"] == "running" for t in self._tasks())

    def _read_logs(self, tail: int) -> bytes:
        return b"".join(self._service.logs(stdout=True, stderr=True, tail=tail))

    def _tail_text(self) -> str:
        return log_tail_text(lambda: self.logs(50))

    def _remove(self, timeout_s: float) -> None:
        remove_service(self._client, self.id, timeout_s)

    def __repr__(self) -> str:
        return f"SwarmHandle(name={self.name!r}, urls={self.urls!r}, env={self.env!r})"


def remove_service(client: docker.DockerClient, service_id: str, timeout_s: float) -> None:
    """Remove a service and its containers on this node: graceful stop, forced after ``timeout_s``.

    Removing a service only asks Swarm to stop its tasks on its own schedule (seconds, through its
    dispatcher), and a task that was being scheduled may still get its container a moment later.
    So the containers on this node are stopped directly (SIGTERM now, SIGKILL after ``timeout_s``)
    and removed, and containers of tasks that had none yet are waited for (bounded) and removed
    too. Containers on other nodes are left to Swarm.
    """
    from docker.errors import APIError

    try:
        tasks = client.api.tasks(filters={"service": service_id})
    except APIError:
        tasks = []
    pending = {t["ID"] for t in tasks if t["Status"]["State"] in _PRE_CONTAINER_STATES
               and t.get("DesiredState") == "running"}
    try:
        client.api.remove_service(service_id)
    except APIError as exc:
        if not not_found(exc):
            raise
    flt = {"label": f"{_SERVICE_LABEL}={service_id}"}
    left = client.containers.list(all=True, filters=flt)
    if timeout_s > 0:
        threads = [threading.Thread(target=_stop_quietly, args=(c, timeout_s), daemon=True)
                   for c in left if c.status in ("running", "restarting", "paused")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout_s + 30)
    _force_remove(service_id, left)
    pending -= {c.labels.get(_TASK_LABEL) for c in left}
    deadline = time.monotonic() + _PENDING_WAIT_S
    while pending and time.monotonic() < deadline:
        time.sleep(0.1)
        late = client.containers.list(all=True, filters=flt)
        _force_remove(service_id, late)
        pending -= {c.labels.get(_TASK_LABEL) for c in late}


def _stop_quietly(container: Any, timeout_s: float) -> None:
    try:
        container.stop(timeout=math.ceil(timeout_s))
    except Exception as exc:  # already gone, or the engine refused: removal by force follows
        log.debug("stopping container %s: %s", container.name, exc)


def _force_remove(service_id: str, containers: list[Any]) -> None:
    from docker.errors import APIError

    for container in containers:
        try:
            remove_container(container)
        except APIError as exc:
            log.warning("could not remove container %s of service %s: %s", container.name,
                        service_id[:12], exc)


class NotASwarmManager(EngineUnavailable, ConfigError):
    """The engine answers but is not a Swarm manager: no Swarm to start on, list or clean up."""


class SwarmProvider(EngineProvider[SwarmHandle]):
    """Starts env servers as Swarm services; see the module docstring for the promises."""

    name: ClassVar[str] = "swarm"
    resource_kind: ClassVar[str] = "service"
    overlay_network: ClassVar[bool] = True

    def _connect(self) -> docker.DockerClient:
        """The engine client; it must be a Swarm manager (``NotASwarmManager``, a ``ConfigError``,
        says how to make one)."""
        client = connect()
        swarm = client.info().get("Swarm") or {}
        if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
            client.close()
            raise NotASwarmManager(
                "The Docker engine is not a Swarm manager (swarm state: "
                f"{swarm.get('LocalNodeState') or 'unknown'}). Make it one with "
                "`docker swarm init --advertise-addr 127.0.0.1`, or point DOCKER_HOST at a "
                "manager node.")
        return client

    def _options(self, spec: LaunchSpec) -> ContainerOptions:
        return parse_options(spec.options, provider=self.name, swarm=True)

    def _create(self, client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                image: ResolvedImage, labels: dict[str, str], network: str | None) -> Service:
        target = network or (None if opts.network == "bridge" else opts.network)
        # An env declaring sandbox.drop_privileges runs as root with the sandbox's capabilities only;
        # Swarm cannot choose a runtime, so its gVisor setting has no effect here (docker provider only).
        user, cap_add = identity(image, opts)
        opts = dataclasses.replace(opts, user=user, cap_add=cap_add)
        return client.services.create(**self._service_args(
            client, spec, opts, image.id, server_command(image, spec), labels, target,
            image.read_only_ok, image.env))

    def _handle(self, client: docker.DockerClient, resource: Service, spec: LaunchSpec,
                opts: ContainerOptions, env: str, network: str | None) -> SwarmHandle:
        return SwarmHandle(client, resource, env=env, token=spec.token, network=network,
                           replicas=opts.replicas, startup_timeout_s=spec.startup_timeout_s)

    def _discard(self, client: docker.DockerClient, resource: Service) -> None:
        remove_service(client, resource.id, 0)

    def _service_args(self, client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                      image_id: str, args: list[str] | None, labels: dict[str, str],
                      network: str | None, image_read_only_ok: bool, env: str) -> dict[str, Any]:
        from docker.types import EndpointSpec, Mount, Resources, RestartPolicy, ServiceMode

        read_only = opts.read_only if opts.read_only is not None else image_read_only_ok
        resources = Resources(cpu_limit=opts.nano_cpus, mem_limit=opts.memory_bytes)
        if api_version_at_least(client, "1.41"):
            resources["Limits"]["Pids"] = opts.pids_limit
        port: dict[str, Any] = {"Protocol": "tcp", "TargetPort": CONTAINER_PORT, "PublishMode": "host"}
        if opts.published_port is not None:
            port["PublishedPort"] = opts.published_port
        kwargs: dict[str, Any] = {
            # The image is pinned by id so that every replica (and every scale-up) runs the same
            # build, whatever later happens to the tag.
            "image": image_id,
            "command": None,
            "args": args,
            "name": resource_name(env, uuid.uuid4().hex[:10]),
            "labels": labels,
            "container_labels": labels,
            "env": server_environment(spec),
            "mode": ServiceMode("replicated", replicas=opts.replicas),
            "endpoint_spec": EndpointSpec(ports=[port]),
            "resources": resources,
            "restart_policy": RestartPolicy(condition="on-failure", delay=1_000_000_000),
            "mounts": [Mount("/tmp", None, type="tmpfs",
                             tmpfs_size=parse_memory(opts.tmpfs_size, "tmpfs_size", 1024 * 1024))],
            "read_only": read_only,
            "cap_drop": ["ALL"],
            "cap_add": list(opts.cap_add) or None,
            "init": opts.init,
            "stop_grace_period": 10_000_000_000,
            "log_driver": "json-file",
            "log_driver_options": {"max-size": "10m", "max-file": "2"},
        }
        if network is not None:
            kwargs["networks"] = [network]
        if opts.user is not None:
            kwargs["user"] = opts.user
        if api_version_at_least(client, "1.44"):
            kwargs["privileges"] = {"NoNewPrivileges": True}
        return kwargs

    # -- list / gc --------------------------------------------------------------------------------

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        client = self.client()
        owner = None if all_owners else owner_id()
        services = client.api.services(filters={"label": label_filters(self.name, owner)})
        return [self._info(client, s) for s in services]

    def _info(self, client: docker.DockerClient, service: dict[str, Any]) -> HandleInfo:
        labels = (service.get("Spec") or {}).get("Labels") or {}
        wanted = (((service.get("Spec") or {}).get("Mode") or {}).get("Replicated") or {}).get("Replicas")
        running, base_url = 0, None
        try:
            tasks = client.api.tasks(filters={"service": service["ID"], "desired-state": "running"})
        except Exception:
            tasks = []
        for task in tasks:
            if task["Status"]["State"] == "running":
                running += 1
                port = _task_port(task)
                if base_url is None and port is not None:
                    base_url = f"http://127.0.0.1:{port}"
        return HandleInfo(
            provider=self.name,
            id=service["ID"],
            owner=labels.get(LABEL_OWNER, ""),
            base_url=base_url,
            status=f"running {running}/{wanted if wanted is not None else '?'}",
            env=labels.get(LABEL_ENV) or None,
        )

    def gc(self) -> builtins.list[HandleInfo]:
        from docker.errors import APIError

        client = self.client()
        removed: list[HandleInfo] = []
        for service in client.api.services(filters={"label": label_filters(self.name)}):
            labels = (service.get("Spec") or {}).get("Labels") or {}
            if owner_alive(labels.get(LABEL_OWNER, "")):
                continue
            info = self._info(client, service)
            try:
                remove_service(client, service["ID"], 10.0)
            except APIError as exc:
                log.warning("gc: could not remove service %s: %s", service["ID"][:12], exc)
                continue
            info.status = "removed"
            removed.append(info)
        # Task containers of services removed by other means (they carry the same labels).
        self.gc_containers(client)
        self.gc_networks(client)
        return removed
