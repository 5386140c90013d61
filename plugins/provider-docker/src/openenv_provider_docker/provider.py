"""The ``docker`` provider: one hardened container per env server (Docker Engine or Podman).

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), beyond the interface's:

* The container's port 8000 is published on 127.0.0.1 only, on a host port the engine picks
  (``("127.0.0.1", None)``) and that is read back from the container: no port race.
* Hardened by default (``options`` module): all capabilities dropped, ``no-new-privileges``,
  memory/CPU/pids limits, read-only root with a tmpfs ``/tmp`` (unless the image says its env
  needs a writable root), an isolated per-owner network (no peers, no outbound NAT), a tiny init
  as PID 1.
* An env whose manifest declares ``sandbox:`` gets exactly what its code sandbox asks for and
  nothing more (``sandboxing``): root with ``CAP_SETUID``/``CAP_SETGID``/``CAP_CHOWN`` only, and
  gVisor's ``runsc`` runtime where the engine has it.
* Secrets (``spec.token``, ``spec.env_vars``) go only into the container's environment, never into
  its command line or our logs. (Anyone allowed to ``docker inspect`` can read a container's
  environment; such a user controls the engine, i.e. is root on its host, anyway.)
* Every resource is labelled (``naming.managed_labels``) with the owner process's ``owner_id()``.
* ``start`` returns only once the server passes ``openenv.readiness`` (``/health``, then a ``/ws``
  round-trip where the image serves ``/ws``). A container that exits
  during start-up is reported at once with its exit code and log tail; any failure (a timeout, a
  bad option, Ctrl-C) removes the container and releases the network before re-raising.
* ``stop`` sends SIGTERM, SIGKILL after ``timeout_s``, and always removes the container; it is
  idempotent. Handles still running at interpreter exit are stopped by an ``atexit`` hook
  (``base.stop_live_handles``, shared with the swarm provider); a
  process killed with SIGKILL leaves its containers to ``gc``, which removes every container and
  network whose owner process is gone.
"""

from __future__ import annotations

import builtins
import logging
import math
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from openenv.interfaces import HandleInfo, LaunchSpec, owner_id
from openenv.readiness import log_tail_text, wait_until_ready
from openenv_provider_docker import networks, sandboxing
from openenv_provider_docker.base import (
    PORT_KEY,
    EngineHandle,
    EngineProvider,
    port_bindings,
    remove_container,
)
from openenv_provider_docker.engine import not_found
from openenv_provider_docker.images import ResolvedImage, server_command, server_environment
from openenv_provider_docker.naming import LABEL_ENV, LABEL_OWNER, label_filters, resource_name
from openenv_provider_docker.options import ContainerOptions, parse_options

if TYPE_CHECKING:
    import docker
    from docker.models.containers import Container

__all__ = ["PODMAN_NPROC", "DockerHandle", "DockerProvider", "published_port"]

log = logging.getLogger("openenv.provider.docker")

#: RLIMIT_NPROC sent to Podman when ``options["nproc"]`` is not given (see ``options``).
PODMAN_NPROC = 32768


def published_port(attrs: dict[str, Any]) -> int | None:
    """The host port bound to the server's port on 127.0.0.1, from a container's attributes."""
    for binding in port_bindings(attrs):
        if binding.get("HostPort") and binding.get("HostIp") in ("127.0.0.1", "", None):
            return int(binding["HostPort"])
    return None


def _exit_description(attrs: dict[str, Any]) -> str | None:
    state = attrs.get("State") or {}
    if state.get("Status") not in ("exited", "dead"):
        return None
    text = f"exited with code {state.get('ExitCode')}"
    if state.get("OOMKilled"):
        text += " (killed for using too much memory: raise options['memory'])"
    elif state.get("Error"):
        text += f" ({state['Error']})"
    return text


class DockerHandle(EngineHandle):
    """A running env server container. ``base_url`` is ``http://127.0.0.1:<host port>``."""

    provider = "docker"

    def __init__(self, client: docker.DockerClient, container: Container, *, env: str,
                 token: str | None, network: str | None, startup_timeout_s: float = 60.0) -> None:
        self._container = container
        super().__init__(client, container, env=env, token=token, network=network,
                         startup_timeout_s=startup_timeout_s)

    # -- start-up ---------------------------------------------------------------------------------

    def _begin(self, timeout_s: float) -> str:
        """Start the container and read the engine-assigned host port (fails at once if it died)."""
        self._container.start()
        self._container.reload()
        gone = _exit_description(self._container.attrs)
        if gone is not None:
            raise RuntimeError(f"container {self.name} {gone} during start-up."
                               f"{log_tail_text(lambda: self.logs(50))}")
        port = published_port(self._container.attrs)
        if port is None:
            raise RuntimeError(f"container {self.name} has no port published on 127.0.0.1 for "
                               f"{PORT_KEY}: {self._container.attrs['NetworkSettings'].get('Ports')}")
        return f"http://127.0.0.1:{port}"

    def _exited(self) -> str | None:
        try:
            self._container.reload()
        except Exception as exc:
            if not_found(exc):
                return "was removed"
            raise
        return _exit_description(self._container.attrs)

    def wait_ready(self, timeout_s: float) -> None:
        # Each poll asks the engine about the container too, hence the longer pause between polls.
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, exited=self._exited,
                         log_tail=lambda: self.logs(50), what=f"container {self.name}",
                         max_interval_s=0.25)

    # -- the container ------------------------------------------------------------------------------

    def _running(self) -> bool:
        self._container.reload()
        return self._container.status == "running"

    def _read_logs(self, tail: int) -> bytes:
        raw: bytes = self._container.logs(stdout=True, stderr=True, tail=tail)
        return raw

    def _remove(self, timeout_s: float) -> None:
        if timeout_s > 0:
            try:
                # The engine sends SIGTERM, then SIGKILL once the grace period is over.
                self._container.stop(timeout=math.ceil(timeout_s))
            except Exception as exc:
                if not not_found(exc):
                    log.warning("stopping container %s failed (%s); removing it by force",
                                self.name, exc)
        remove_container(self._container)

    def __repr__(self) -> str:
        return f"DockerHandle(name={self.name!r}, base_url={self.base_url!r}, env={self.env!r})"


class DockerProvider(EngineProvider[DockerHandle]):
    """Starts env servers as hardened containers; see the module docstring for the promises."""

    name: ClassVar[str] = "docker"
    resource_kind: ClassVar[str] = "container"

    def _options(self, spec: LaunchSpec) -> ContainerOptions:
        return parse_options(spec.options, provider=self.name)

    def _create(self, client: docker.DockerClient, spec: LaunchSpec, opts: ContainerOptions,
                image: ResolvedImage, labels: dict[str, str], network: str | None) -> Container:
        from docker.types import Ulimit

        read_only = opts.read_only if opts.read_only is not None else image.read_only_ok
        user, cap_add = sandboxing.identity(image, opts)
        runtime = sandboxing.runtime(client, image, opts)
        args: dict[str, Any] = {
            "image": image.id,
            "command": server_command(image, spec),
            "name": resource_name(image.env, uuid.uuid4().hex[:10]),
            "detach": True,
            "environment": server_environment(spec),
            "labels": labels,
            "ports": {PORT_KEY: ("127.0.0.1", None)},
            "cap_drop": ["ALL"],
            "cap_add": list(cap_add) or None,
            "security_opt": ["no-new-privileges"],
            "pids_limit": sandboxing.pids_limit(runtime, opts, explicit="pids_limit" in spec.options),
            "mem_limit": opts.memory_bytes,
            "memswap_limit": opts.memory_bytes,  # no swap on top of the memory limit
            "nano_cpus": opts.nano_cpus,
            "read_only": read_only,
            "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={opts.tmpfs_size}"},
            "init": opts.init,
            "network": network or opts.network,
            # Explicit, so the container never inherits the engine's (often huge) default.
            "ulimits": [Ulimit(name="nofile", soft=opts.nofile, hard=opts.nofile)],
        }
        nproc = opts.nproc
        if nproc is None and networks.is_podman(client):
            # Podman fills an nproc missing from a request that has ulimits with 1048576, which a
            # root without CAP_SYS_RESOURCE cannot set: runc then refuses every container.
            nproc = PODMAN_NPROC
        if nproc is not None:
            args["ulimits"].append(Ulimit(name="nproc", soft=nproc, hard=nproc))
        if user is not None:
            args["user"] = user
        if runtime is not None:
            args["runtime"] = runtime
        if not networks.is_podman(client):
            # Bounded logs: a chatty env must not fill the host's disk. (Podman picks its own driver.)
            args["log_config"] = {"Type": "json-file", "Config": {"max-size": "10m", "max-file": "2"}}
        return client.containers.create(**args)

    def _handle(self, client: docker.DockerClient, resource: Container, spec: LaunchSpec,
                opts: ContainerOptions, env: str, network: str | None) -> DockerHandle:
        return DockerHandle(client, resource, env=env, token=spec.token, network=network,
                            startup_timeout_s=spec.startup_timeout_s)

    def _discard(self, client: docker.DockerClient, resource: Container) -> None:
        resource.remove(force=True, v=True)

    # -- list / gc --------------------------------------------------------------------------------

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        client = self.client()
        owner = None if all_owners else owner_id()
        containers = client.containers.list(all=True, filters={"label": label_filters(self.name, owner)})
        return [self._info(c) for c in containers]

    def _info(self, container: Container) -> HandleInfo:
        port = published_port(container.attrs)
        return HandleInfo(
            provider=self.name,
            id=container.id,
            owner=container.labels.get(LABEL_OWNER, ""),
            base_url=f"http://127.0.0.1:{port}" if port else None,
            status=container.status,
            env=container.labels.get(LABEL_ENV) or None,
        )

    def gc(self) -> builtins.list[HandleInfo]:
        client = self.client()
        removed: list[HandleInfo] = []
        for container in self.gc_containers(client):
            info = self._info(container)
            info.status = "removed"
            removed.append(info)
        self.gc_networks(client)
        return removed
