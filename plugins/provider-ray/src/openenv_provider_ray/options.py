"""Options of the ``ray`` provider and the names of its actors (no Ray import here).

Every actor the provider starts is a *named* actor in the Ray namespace ``openenv``, and its name
carries what ``ps``/``gc`` need without asking the actor: ``openenv|<id>|<owner>|<env>``, where
``<owner>`` is ``openenv.interfaces.owner_id()`` of the process that started it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import ConfigError, did_you_mean
from openenv.interfaces import LaunchSpec
from openenv.readiness import MODES

__all__ = ["NAMESPACE", "OPTIONS", "ActorName", "RayOptions", "parse_memory", "parse_options"]

#: The Ray namespace every env-server actor lives in.
NAMESPACE = "openenv"
_PREFIX = "openenv"

#: ``LaunchSpec.options`` the ray provider accepts.
OPTIONS = frozenset({
    "address", "cpus", "memory", "placement", "runtime_env", "detach", "bind", "probe",
    "transports", "step_timeout_s", "idle_timeout_s", "log_level", "resources",
})
PLACEMENTS = ("pack", "spread")
_BINDS = ("127.0.0.1", "node")
_UNITS = {"": 1, "k": 1024, "ki": 1024, "m": 1024**2, "mi": 1024**2, "g": 1024**3, "gi": 1024**3}


@dataclass(frozen=True)
class ActorName:
    """The parts of an env-server actor's name."""

    id: str
    owner: str
    env: str

    def __str__(self) -> str:
        return f"{_PREFIX}|{self.id}|{self.owner}|{self.env}"

    @classmethod
    def parse(cls, name: str) -> ActorName | None:
        """The parts of ``name``, or ``None`` for an actor this provider did not name."""
        parts = name.split("|", 3)
        if len(parts) != 4 or parts[0] != _PREFIX or not all(parts[1:]):
            return None
        return cls(id=parts[1], owner=parts[2], env=parts[3])


@dataclass
class RayOptions:
    """``LaunchSpec.options`` of one start, checked."""

    address: str | None = None
    cpus: float = 1.0
    memory: int | None = None
    placement: str = "pack"
    runtime_env: dict[str, Any] | None = None
    detach: bool = False
    bind: str = "127.0.0.1"
    probe: str = "auto"
    resources: dict[str, float] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    log_level: str = "info"


def parse_memory(value: Any) -> int:
    """Bytes from ``512Mi``, ``2g``, ``1048576`` or an int; ``ConfigError`` otherwise."""
    if isinstance(value, bool):
        raise ConfigError(f"memory={value!r}: give bytes (an int) or a size like '512Mi' or '2g'.")
    if isinstance(value, int | float):
        if value <= 0:
            raise ConfigError(f"memory={value!r} must be positive.")
        return int(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*?)[bB]?\s*", str(value))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ConfigError(f"memory={value!r} is not a size: use bytes or a number with k/m/g "
                          "(or Ki/Mi/Gi), e.g. '512Mi'.")
    return int(float(match.group(1)) * _UNITS[unit])


def parse_options(spec: LaunchSpec, default_address: str | None) -> RayOptions:
    """Check ``spec.options`` against ``OPTIONS`` and return them typed; ``ConfigError`` if bad."""
    opts = spec.options
    unknown = sorted(set(opts) - OPTIONS)
    if unknown:
        raise ConfigError(f"Unknown option '{unknown[0]}' for provider 'ray'."
                          f"{did_you_mean(unknown[0], sorted(OPTIONS))} Accepted options: "
                          f"{', '.join(sorted(OPTIONS))}.")
    if spec.max_sessions is not None and spec.max_sessions < 1:
        raise ConfigError(f"max_sessions must be at least 1, got {spec.max_sessions}.")
    placement = str(opts.get("placement", "pack"))
    if placement not in PLACEMENTS:
        raise ConfigError(f"placement={placement!r}: use one of {', '.join(PLACEMENTS)}."
                          f"{did_you_mean(placement, PLACEMENTS)}")
    probe = str(opts.get("probe", "auto"))
    if probe not in MODES:
        raise ConfigError(f"Unknown probe mode {probe!r} (options['probe']): use one of {', '.join(MODES)}.")
    bind = str(opts.get("bind", "127.0.0.1"))
    if bind not in _BINDS:
        raise ConfigError(f"bind={bind!r}: use '127.0.0.1' (driver and actor on one machine) or 'node' "
                          "(the actor's node IP, for a multi-node cluster on a private network).")
    try:
        cpus = float(opts.get("cpus", 1.0))
    except (TypeError, ValueError):
        raise ConfigError(f"cpus={opts.get('cpus')!r} is not a number (e.g. 0.5 or 2).") from None
    if cpus < 0:
        raise ConfigError(f"cpus={cpus:g} must not be negative.")
    runtime_env = opts.get("runtime_env")
    if runtime_env is not None and not isinstance(runtime_env, dict):
        raise ConfigError("runtime_env must be a dict (Ray's runtime_env, e.g. {'pip': [...]}).")
    resources = opts.get("resources") or {}
    if not isinstance(resources, dict):
        raise ConfigError("resources must be a dict of custom Ray resources, e.g. {'env_slot': 1}.")
    server: dict[str, Any] = {"max_sessions": spec.max_sessions, "mode": spec.mode, "token": spec.token}
    transports = opts.get("transports")
    if transports:
        server["transports"] = [transports] if isinstance(transports, str) else list(transports)
    for key in ("step_timeout_s", "idle_timeout_s"):
        if opts.get(key) is not None:
            server[key] = float(opts[key])
    address = opts.get("address") or default_address or os.environ.get("RAY_ADDRESS") or None
    return RayOptions(
        address=str(address) if address else None, cpus=cpus,
        memory=parse_memory(opts["memory"]) if opts.get("memory") is not None else None,
        placement=placement, runtime_env=runtime_env, detach=bool(opts.get("detach", False)),
        bind=bind, probe=probe, resources={str(k): float(v) for k, v in resources.items()},
        server=server, log_level=str(opts.get("log_level", "info")),
    )
