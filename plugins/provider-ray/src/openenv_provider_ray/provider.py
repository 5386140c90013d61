"""The ``ray`` provider: each env server is a named Ray actor serving ``openenv serve``'s app.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``):

* The cluster is the one this process already joined (``ray.is_initialized()``, e.g. a trainer's),
  else ``options["address"]``, the provider's ``address=``, or ``RAY_ADDRESS``; without any of them
  a local one is started (``ray.init(address="local")`` on 127.0.0.1, no dashboard, no usage stats).
* The actor asks for ``cpus`` (default 1), ``memory`` and custom ``resources``; ``placement="pack"``
  (default) pins it to the driver's node, ``"spread"`` uses Ray's SPREAD strategy. The server binds
  127.0.0.1 (``bind="node"``: the node's IP, for multi-node clusters); spreading actors that bind
  127.0.0.1 over several nodes is refused when a node is on another machine (its address is not
  loopback), since the driver could not reach them there.
* ``start`` returns a ready handle (``openenv.readiness`` probe). An actor that dies or whose
  server fails during start-up fails the start at once with its error; one that is never scheduled
  (the cluster lacks the resources) or never ready is killed at ``startup_timeout_s``.
* Actors are named ``openenv|<id>|<owner>|<env>`` in namespace ``openenv``: ``ps``/``gc`` read the
  names (``ray.util.list_named_actors``). An actor dies with the process that started it (Ray's
  ownership) unless ``detach=True``; a detached one whose owner is gone is killed by ``gc``.
* ``stop`` asks uvicorn to exit, then kills the actor; idempotent and safe after the actor died.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle, owner_alive, owner_id
from openenv.readiness import wait_until_ready
from openenv_provider_ray.actor import EnvServerActor
from openenv_provider_ray.options import NAMESPACE, ActorName, RayOptions, parse_options

__all__ = ["RayHandle", "RayProvider", "connect"]

log = logging.getLogger("openenv.provider.ray")
_connect_lock = threading.Lock()


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address``, or start a local one bound to 127.0.0.1 (no-op if joined)."""
    if not address and "ray" not in sys.modules:
        # Read by Ray at import and by the processes it starts: with this, a local cluster's GCS,
        # raylet and workers listen on 127.0.0.1 only (without it they bind every interface).
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    with _connect_lock:
        if ray.is_initialized():
            return
        if address and not _reachable(address):
            # ray.init would retry for minutes; nothing there can become a cluster by waiting.
            raise ConnectionError(
                f"Nothing answers at the Ray address {address}: set RAY_ADDRESS (or the provider's "
                "address= option) to a running cluster's GCS address, or unset it to start a local "
                "cluster.")
        try:
            if address:
                ray.init(address=address, namespace=NAMESPACE, logging_level=logging.WARNING,
                         log_to_driver=False)
            else:
                ray.init(address="local", namespace=NAMESPACE, include_dashboard=False,
                         _node_ip_address="127.0.0.1", logging_level=logging.WARNING,
                         log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConnectionError(_connect_failure(address, exc)) from None


def _reachable(address: str) -> bool:
    """Whether a TCP connection to a ``host:port`` address succeeds (True for other address forms)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return True  # "auto", "ray://...": let Ray resolve it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
    except OSError:
        return False
    return True


def _connect_failure(address: str | None, exc: BaseException) -> str:
    """One line saying why joining the cluster failed and which variable to set."""
    first = _first_line(exc)
    if not address:
        return f"Cannot start a local Ray cluster: {first}"
    if "://" not in address and ":" in address:
        return (f"The Ray cluster at {address} answers but refused this driver ({first}), most often "
                "for a missing or wrong token: set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to the "
                "cluster's token.")
    return (f"Cannot join the Ray cluster at {address}: {first}. Check RAY_ADDRESS (or the provider's "
            "address= option).")


class RayHandle(ProviderHandle):
    """A running env server inside a Ray actor."""

    def __init__(self, *, provider: str, id: str, base_url: str, actor: Any, name: ActorName,
                 watch: Any, token: str | None, probe_mode: str, node_id: str | None = None) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url)  # the base refuses empty fields
        self.actor = actor
        self.name = name
        self.env = name.env
        self.node_id = node_id
        self._watch = watch
        self._token = token
        self._probe_mode = probe_mode
        self._lock = threading.Lock()
        self._stopped = False
        self._final_logs = ""

    def __repr__(self) -> str:
        return f"<RayHandle {self.id} env={self.env!r} url={self.base_url} node={self.node_id}>"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while it runs); never blocks."""
        import ray

        ready, _ = ray.wait([self._watch], timeout=0)
        if not ready:
            return None
        try:
            return f"stopped ({ray.get(self._watch)})"
        except ray.exceptions.RayActorError as exc:
            return f"died (Ray actor {self.id}: {_first_line(exc)})"
        except ray.exceptions.RayError as exc:
            return f"failed ({_first_line(exc)})"

    def is_running(self) -> bool:
        return not self._stopped and self.exit_description() is None

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, mode=self._probe_mode,
                         exited=self.exit_description, log_tail=lambda: self.logs(30),
                         what=f"env server '{self.env}' (Ray actor {self.id})")

    def logs(self, tail: int = 50) -> str:
        if self._stopped:
            return "\n".join(self._final_logs.splitlines()[-tail:]) if tail > 0 else ""
        return _actor_logs(self.actor, tail)

    def stop(self, timeout_s: float = 10.0) -> None:
        import ray

        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self.exit_description() is None:
                self._final_logs = _actor_logs(self.actor, 200)
                with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
                    ray.get(self.actor.shutdown.remote(min(timeout_s, 5.0)), timeout=timeout_s)
            _kill(self.actor, self._watch, timeout_s)


class RayProvider(Provider):
    """Env servers as Ray actors (see the module docstring for the promises)."""

    name: ClassVar[str] = "ray"
    requires: ClassVar[str] = ("a Ray cluster it joins in-process (ray.init): its own tests start a local head "
                               "on 127.0.0.1 and run the contract (plugins/provider-ray/tests)")

    def __init__(self, address: str | None = None) -> None:
        self.address = address

    def start(self, spec: LaunchSpec) -> RayHandle:
        opts = parse_options(spec, self.address)
        connect(opts.address)
        import ray

        server_id = f"ray-{uuid.uuid4().hex[:12]}"
        name = ActorName(id=server_id, owner=owner_id(), env=spec.env)
        actor_cls: Any = ray.remote(EnvServerActor)
        config = dict(opts.server, host="127.0.0.1" if opts.bind == "127.0.0.1" else "node",
                      env_name=None)
        started = time.monotonic()
        actor = actor_cls.options(**self._actor_options(name, opts)).remote(
            spec.env, config, dict(spec.env_vars), opts.log_level)
        watch = actor.wait_closed.remote()
        try:
            info = self._await_start(actor, watch, spec, opts)
            handle = RayHandle(provider=self.name, id=server_id,
                               base_url=f"http://{info['host']}:{int(info['port'])}", actor=actor,
                               name=name, watch=watch, token=spec.token, probe_mode=opts.probe,
                               node_id=info.get("node_id"))
            handle.wait_ready(max(0.5, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException:
            _kill(actor, watch, 5.0)
            raise
        log.info("started %s for env %s at %s", server_id, spec.env, handle.base_url)
        return handle

    def _actor_options(self, name: ActorName, opts: RayOptions) -> dict[str, Any]:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy: Any
        if opts.placement == "spread":
            alive = [n for n in ray.nodes() if n.get("Alive")]
            # Nodes whose address is loopback all run on this machine: 127.0.0.1 reaches them.
            remote = [n for n in alive if not str(n.get("NodeManagerAddress", "")).startswith("127.")]
            if opts.bind == "127.0.0.1" and len(alive) > 1 and remote:
                raise ConfigError(
                    f"placement='spread' on a {len(alive)}-node cluster puts env servers on other "
                    "nodes, where a server bound to 127.0.0.1 cannot be reached from this driver. "
                    "Pass bind='node' (servers bind their node's IP) or use placement='pack'.")
            strategy = "SPREAD"
        else:  # pack: on the driver's node (required to be reachable at 127.0.0.1)
            strategy = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                      soft=opts.bind != "127.0.0.1")
        options: dict[str, Any] = {
            "name": str(name), "namespace": NAMESPACE, "num_cpus": opts.cpus, "max_concurrency": 8,
            "max_restarts": 0, "scheduling_strategy": strategy,
        }
        if opts.detach:
            options["lifetime"] = "detached"
        if opts.memory is not None:
            options["memory"] = opts.memory
        if opts.resources:
            options["resources"] = opts.resources
        if opts.runtime_env:
            options["runtime_env"] = opts.runtime_env
        return options

    def _await_start(self, actor: Any, watch: Any, spec: LaunchSpec, opts: RayOptions) -> dict[str, Any]:
        """Wait for the actor's server to listen; fail at once if the actor dies first."""
        import ray

        what = f"env server '{spec.env}' (Ray actor)"
        start_ref = actor.start.remote(spec.startup_timeout_s)
        ready, _ = ray.wait([start_ref], timeout=spec.startup_timeout_s)
        asked = f"num_cpus={opts.cpus:g}" + (f", memory={opts.memory}" if opts.memory else "") + \
            "".join(f", {k}={v:g}" for k, v in opts.resources.items())
        if not ready:
            raise TimeoutError(
                f"{what} did not start within {spec.startup_timeout_s:g}s. If the cluster lacks the "
                f"resources the actor asks for ({asked}), it is never scheduled: see `ray status`, ask "
                "for less (options cpus/memory), or raise LaunchSpec.startup_timeout_s.")
        try:
            info: dict[str, Any] = ray.get(start_ref)
        except ray.exceptions.ActorUnschedulableError as exc:
            raise RuntimeError(
                f"{what} cannot be scheduled: {_first_line(exc)} It asks for {asked} on this "
                "driver's node (placement='pack'): ask for less (options cpus/memory), or use "
                "placement='spread' with bind='node' to run it on another node.") from None
        except ray.exceptions.RayActorError as exc:
            raise RuntimeError(f"{what} died during start-up: {_describe(exc)}") from None
        except ray.exceptions.RayTaskError as exc:
            raise RuntimeError(f"{what} failed during start-up: {_describe(exc)}") from None
        return info

    # -- bookkeeping ------------------------------------------------------------------------------

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Env-server actors of this owner (of every owner with ``all_owners``) in the cluster."""
        found = self._named(all_owners=all_owners)
        if not found:
            return []
        import ray

        refs = [actor.info.remote() for _, actor in found]
        ray.wait(refs, num_returns=len(refs), timeout=5.0)
        infos = []
        for (name, _), ref in zip(found, refs, strict=True):
            base_url, status = None, "running" if owner_alive(name.owner) else "orphaned"
            try:
                data = ray.get(ref, timeout=0)
                base_url = f"http://{data['host']}:{int(data['port'])}" if data.get("port") else None
                if not data.get("running"):
                    status = "stopped"
            except (ray.exceptions.RayError, TimeoutError):
                status = "unresponsive"
            infos.append(HandleInfo(provider=self.name, id=name.id, owner=name.owner,
                                    base_url=base_url, status=status, env=name.env))
        return infos

    def gc(self) -> builtins.list[HandleInfo]:
        """Kill the env-server actors whose owner process is gone; return what was removed."""
        removed = []
        for name, actor in self._named(all_owners=True):
            if owner_alive(name.owner):
                continue
            _kill(actor, actor.wait_closed.remote(), 10.0)
            removed.append(HandleInfo(provider=self.name, id=name.id, owner=name.owner,
                                      status="orphaned", env=name.env))
        return removed

    def _named(self, *, all_owners: bool) -> builtins.list[tuple[ActorName, Any]]:
        """(name, actor handle) of the live env-server actors in the cluster."""
        import ray

        if not ray.is_initialized():
            address = self.address or os.environ.get("RAY_ADDRESS")
            if not address:
                return []  # no cluster joined and none named: nothing of ours can be running
            connect(address)
        me = owner_id()
        out = []
        for entry in ray.util.list_named_actors(all_namespaces=True):
            if entry.get("namespace") != NAMESPACE:
                continue
            name = ActorName.parse(str(entry.get("name", "")))
            if name is None or (not all_owners and name.owner != me):
                continue
            try:
                out.append((name, ray.get_actor(str(name), namespace=NAMESPACE)))
            except ValueError:
                continue  # it died between the listing and the lookup
        return out


def _kill(actor: Any, watch: Any, timeout_s: float) -> None:
    """Kill ``actor`` and wait (bounded) until Ray reports it dead, so listings no longer show it."""
    import ray

    with contextlib.suppress(ray.exceptions.RayError, ValueError):
        ray.kill(actor, no_restart=True)
    ray.wait([watch], timeout=timeout_s)


def _actor_logs(actor: Any, tail: int) -> str:
    import ray

    try:
        return str(ray.get(actor.logs.remote(tail), timeout=5.0))
    except (ray.exceptions.RayError, TimeoutError) as exc:
        return f"(logs unavailable: {_first_line(exc)})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _describe(exc: BaseException) -> str:
    """The useful part of a Ray error: the remote exception's last line, else its first line."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return f"{type(cause).__name__}: {cause}"
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return " ".join(lines[-2:]) if lines else type(exc).__name__
