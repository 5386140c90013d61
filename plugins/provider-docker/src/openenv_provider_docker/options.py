"""``LaunchSpec.options`` for container providers: parsing, validation and the hardened defaults.

Defaults (each one an option; see the README's table):

=================  ===============  =====================================================
option             default          effect
=================  ===============  =====================================================
``memory``         ``"512m"``       memory limit (bytes, or a number with k/m/g)
``cpus``           ``1.0``          CPU limit (fractions allowed)
``pids_limit``     ``256``          max processes/threads in the container (fork bombs)
``read_only``      image's choice   read-only root filesystem; the image says ``false``
                                    (label ``org.openenv.read-only-root``) if its env
                                    must write outside ``/tmp``; otherwise ``True``
``tmpfs_size``     ``"64m"``        size of the writable tmpfs at ``/tmp``
``network``        ``"isolated"``   see below
``cap_add``        ``[]``           capabilities to give back (all are dropped)
``user``           image's USER     user to run as (``openenv build`` images: 10001)
``labels``         ``{}``           extra labels on every resource
``pull``           see below        ``"never"``, ``"missing"`` or ``"always"``
``init``           ``True``         a tiny init as PID 1 (signals, zombie reaping)
``nofile``         ``8192``         docker only: open files (each session's socket is one)
``nproc``          see below        docker only: ``RLIMIT_NPROC`` (processes of the uid)
``runtime``        see below        docker only: the engine's OCI runtime (``runsc``, ...)
``replicas``       ``1``            Swarm only: tasks of the service
``published_port`` engine's choice  Swarm only: pin the host port (one task per node then)
=================  ===============  =====================================================

``network``: ``"isolated"`` (default) puts containers on a per-owner bridge network with
inter-container traffic off and IP masquerading off: the host reaches the published port, other
containers cannot reach the server, and the server cannot reach the internet (no NAT). Fully
disconnected (``"none"``) would be safer still, but then nothing can be published and the env
server could not be reached at all, so it is refused with an explanation. ``"bridge"`` (Docker's
default network: outbound access on) or the name of an existing network are accepted when an env
really needs the network. Every other check (no capabilities, no new privileges, limits) stays on.

``pull``: ``"never"`` when the image was derived from the env name (it is built locally by
``openenv build``; a registry has nothing to offer and trying would only be slow), otherwise
``"missing"``.

``runtime``: by default the engine's own, except for envs whose manifest declares ``sandbox.gvisor``
(``auto``: gVisor's ``runsc`` when the engine has it; ``required``: refused without it; see
``sandboxing``). A name given here must be registered with the engine; ``"default"`` forces the
engine's default runtime.

``nproc``: unset, Docker passes on the engine's own limit; Podman would ask for 1048576, which a
root without ``CAP_SYS_RESOURCE`` (Podman inside a container) may not set, so that no container
starts. The provider sends ``PODMAN_NPROC`` (32768) to Podman unless ``nproc`` is given. The limit
counts every process of the uid on the host, not one container's (``pids_limit`` does that).

Unknown option names are refused with the list of known ones (and a "did you mean"), so a typo
never silently drops a limit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import ConfigError, did_you_mean

__all__ = ["COMMON_KEYS", "DOCKER_KEYS", "SWARM_KEYS", "ContainerOptions", "parse_memory", "parse_options"]

COMMON_KEYS = frozenset({
    "memory", "cpus", "pids_limit", "read_only", "tmpfs_size", "network", "cap_add", "user",
    "labels", "pull", "init",
})
SWARM_KEYS = frozenset({"replicas", "published_port"})
#: Options only the docker provider has (Swarm's API has no per-service ulimits before 1.41, and
#: the Docker SDK does not pass them).
DOCKER_KEYS = frozenset({"nofile", "nproc", "runtime"})
_NETWORK_MODES = ("isolated", "bridge")
_PULL = ("never", "missing", "always")
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$", re.IGNORECASE)
_CAP = re.compile(r"^(CAP_)?[A-Z_]+$")
_RUNTIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class ContainerOptions:
    """Validated options; see the module docstring for meanings and defaults."""

    memory_bytes: int = 512 * 1024 * 1024
    cpus: float = 1.0
    pids_limit: int = 256
    read_only: bool | None = None
    tmpfs_size: str = "64m"
    network: str = "isolated"
    cap_add: tuple[str, ...] = ()
    user: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pull: str | None = None
    init: bool = True
    replicas: int = 1
    published_port: int | None = None
    nofile: int = 8192
    nproc: int | None = None
    runtime: str | None = None

    @property
    def nano_cpus(self) -> int:
        return int(self.cpus * 1_000_000_000)


def parse_memory(value: Any, name: str = "memory", minimum: int = 6 * 1024 * 1024) -> int:
    """``"512m"`` → bytes. Accepts an int (bytes) or a number with an optional k/m/g suffix.

    The default ``minimum`` is Docker's own floor for memory limits.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        number, unit = float(value), ""
    else:
        match = _MEMORY.match(str(value))
        if not match:
            raise ConfigError(f"options[{name!r}]={value!r} is not a size: use bytes or a number "
                              "with k, m or g, e.g. '512m' or '2g'.")
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit])
    if size < minimum:
        raise ConfigError(f"options[{name!r}]={value!r} is too small: the minimum is "
                          f"{minimum // 1024}k.")
    return size


def parse_options(options: Mapping[str, Any], *, provider: str, swarm: bool = False) -> ContainerOptions:
    """Validate ``LaunchSpec.options`` for ``provider``; raises ``ConfigError`` naming the fix."""
    known = COMMON_KEYS | (SWARM_KEYS if swarm else DOCKER_KEYS)
    unknown = sorted(set(options) - known)
    if unknown:
        hints = "".join(did_you_mean(name, known) for name in unknown)
        raise ConfigError(f"Unknown option(s) for the {provider} provider: {', '.join(unknown)}."
                          f"{hints} Known options: {', '.join(sorted(known))}.")
    values: dict[str, Any] = {}
    if "memory" in options:
        values["memory_bytes"] = parse_memory(options["memory"])
    if "cpus" in options:
        values["cpus"] = _number(options["cpus"], "cpus", minimum=0.01)
    if "pids_limit" in options:
        values["pids_limit"] = int(_number(options["pids_limit"], "pids_limit", minimum=8, integer=True))
    if "read_only" in options:
        values["read_only"] = _flag(options["read_only"], "read_only")
    if "tmpfs_size" in options:
        parse_memory(options["tmpfs_size"], "tmpfs_size", 1024 * 1024)  # same syntax as memory
        values["tmpfs_size"] = str(options["tmpfs_size"]).strip().lower()
    if "network" in options:
        values["network"] = _network(options["network"])
    if "cap_add" in options:
        values["cap_add"] = _caps(options["cap_add"])
    if "user" in options:
        values["user"] = None if options["user"] is None else str(options["user"])
    if "labels" in options:
        labels = options["labels"]
        if not isinstance(labels, Mapping) or not all(isinstance(k, str) for k in labels):
            raise ConfigError("options['labels'] must be a mapping of label names to values.")
        values["labels"] = {k: str(v) for k, v in labels.items()}
    if "pull" in options:
        if options["pull"] not in _PULL:
            raise ConfigError(f"options['pull']={options['pull']!r}: use one of {', '.join(_PULL)}.")
        values["pull"] = options["pull"]
    if "init" in options:
        values["init"] = _flag(options["init"], "init")
    if "replicas" in options:
        values["replicas"] = int(_number(options["replicas"], "replicas", minimum=1, integer=True))
    if "nofile" in options:
        values["nofile"] = int(_number(options["nofile"], "nofile", minimum=64, maximum=1 << 20,
                                       integer=True))
    if options.get("nproc") is not None:
        values["nproc"] = int(_number(options["nproc"], "nproc", minimum=64, maximum=1 << 22, integer=True))
    if options.get("runtime") is not None:
        if not isinstance(options["runtime"], str) or not _RUNTIME.match(options["runtime"]):
            raise ConfigError(f"options['runtime']={options['runtime']!r}: expected the name of a runtime "
                              "registered with the engine, e.g. 'runsc' (or 'default').")
        values["runtime"] = options["runtime"]
    if options.get("published_port") is not None:
        values["published_port"] = int(_number(options["published_port"], "published_port",
                                                minimum=1, maximum=65535, integer=True))
    return ContainerOptions(**values)


def _number(value: Any, name: str, *, minimum: float, maximum: float | None = None,
            integer: bool = False) -> float:
    bad = isinstance(value, bool) or not isinstance(value, int | float | str)
    try:
        number = float(value) if not bad else 0.0
    except ValueError:
        bad = True
    if bad or (integer and number != int(number)) or number < minimum or (
            maximum is not None and number > maximum):
        kind = "an integer" if integer else "a number"
        upper = f" and at most {maximum:g}" if maximum is not None else ""
        raise ConfigError(f"options[{name!r}]={value!r}: expected {kind} of at least {minimum:g}{upper}.")
    return number


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"options[{name!r}]={value!r}: expected true or false.")


def _network(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"options['network']={value!r}: use 'isolated', 'bridge' or a network name.")
    name = value.strip()
    if name in ("none", "host"):
        why = ("a container without a network cannot publish the server's port, so no client "
               "could reach it" if name == "none" else
               "host networking shares the host's network stack and ports: no isolation at all, "
               "and the server would bind the host's port 8000")
        raise ConfigError(f"options['network']={name!r} is not supported: {why}. The default "
                          "'isolated' already gives the server no outbound access and no peers; "
                          "use 'bridge' (or a network name) only if the env needs the network.")
    return name


def _caps(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value) if isinstance(value, list | tuple) else None
    if items is None or not all(isinstance(c, str) and _CAP.match(c.upper()) for c in items):
        raise ConfigError(f"options['cap_add']={value!r}: expected capability names, e.g. ['NET_BIND_SERVICE'].")
    caps = tuple(c.upper().removeprefix("CAP_") for c in items)
    if "ALL" in caps or "SYS_ADMIN" in caps:
        raise ConfigError("options['cap_add'] may not give back ALL or SYS_ADMIN: that undoes the "
                          "container's isolation. Name the single capabilities the env needs.")
    return caps
