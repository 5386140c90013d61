"""Snapshots of live sessions: the sealed format, and helpers for env authors.

A snapshot is a JSON object a server hands out for a session whose env declares
``SUPPORTS_SNAPSHOT`` (``Environment.snapshot``/``restore``). A client keeps it and gives it back to
a server of the same env to continue the episode there: a fork (two sessions continue from one
point independently) or a restore after the first server died. Its fields::

    {"format": "openenv.snapshot/1", "env": "pkg.module:EnvClass", "env_version": "1.2.0",
     "step_count": 7, "state": {...the env's own data...}, "created_at": 1764950000.0,
     "keyed": true, "seal": "<hex HMAC-SHA256>"}

The seal is an HMAC-SHA256 over every other field (canonical JSON). Its key is
``OPENENV_SNAPSHOT_KEY`` when set, else the server's ``--token``; servers that should accept each
other's snapshots share the key. Without either, snapshots are sealed with a public constant
(``keyed: false``): that still refuses a snapshot altered by hand or in transit, but not one forged
by someone who read this module, so an env's ``restore`` must validate what it receives either way.
A server refuses a snapshot of another env class, another package version of the env, an unknown
format or a broken seal, with a ``SnapshotError`` naming the rule.

Helpers: ``rng_state``/``set_rng_state`` turn a ``random.Random`` into JSON data and back, so a
restored episode draws the same numbers the original would have.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import random
import time
from functools import lru_cache
from importlib import metadata
from typing import Any, Final

import orjson

from openenv.errors import SnapshotError

__all__ = [
    "FORMAT",
    "KEY_ENV",
    "env_identity",
    "rng_state",
    "seal",
    "set_rng_state",
    "snapshot_key",
    "unseal",
]

#: The format tag every snapshot carries; a server refuses any other.
FORMAT: Final = "openenv.snapshot/1"
#: Environment variable holding the key snapshots are sealed with (shared by servers that accept
#: each other's snapshots).
KEY_ENV: Final = "OPENENV_SNAPSHOT_KEY"
#: The public key of unkeyed seals (no ``OPENENV_SNAPSHOT_KEY``, no server token).
_UNKEYED: Final = b"openenv-unkeyed-snapshot"
_FIELDS: Final = frozenset({"format", "env", "env_version", "step_count", "state", "created_at", "keyed", "seal"})


def snapshot_key(token: str | None) -> bytes | None:
    """The key a server seals with: ``OPENENV_SNAPSHOT_KEY``, else its auth token, else None."""
    key = os.environ.get(KEY_ENV) or token
    return key.encode() if key else None


@lru_cache(maxsize=64)
def env_identity(cls: type) -> tuple[str, str]:
    """``("module:QualName", version)`` of an env class; the version is its distribution's
    (``unknown`` for a class defined outside an installed package, e.g. in a test)."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    top = cls.__module__.partition(".")[0]
    dists = metadata.packages_distributions().get(top) or []
    version = "unknown"
    for dist in dists:
        try:
            version = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:  # pragma: no cover - a stale mapping
            continue
    return name, version


def _canonical(body: dict[str, Any]) -> bytes:
    return orjson.dumps({k: v for k, v in body.items() if k != "seal"}, option=orjson.OPT_SORT_KEYS)


def _mac(body: dict[str, Any], key: bytes | None) -> str:
    return hmac.new(key or _UNKEYED, _canonical(body), hashlib.sha256).hexdigest()


def seal(cls: type, state: dict[str, Any], step_count: int, key: bytes | None) -> dict[str, Any]:
    """The sealed snapshot of an episode of ``cls`` whose env data is ``state``.

    ``SnapshotError`` (reason ``malformed``) if ``state`` is not a JSON object of plain data (no
    NaN, no objects JSON cannot carry): a snapshot must survive a trip through any client."""
    if not isinstance(state, dict):
        raise SnapshotError(f"{cls.__qualname__}.snapshot() returned {type(state).__name__}, expected a "
                            "dict of JSON data.", data={"reason": "malformed"})
    try:
        # Round trip: what a client will hold (tuples become lists, keys must be strings).
        state = orjson.loads(orjson.dumps(state))
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise SnapshotError(f"{cls.__qualname__}.snapshot() returned data JSON cannot carry: {exc}. Return "
                            "plain dicts, lists, strings, numbers and booleans.",
                            data={"reason": "malformed"}) from None
    name, version = env_identity(cls)
    body: dict[str, Any] = {"format": FORMAT, "env": name, "env_version": version, "step_count": step_count,
                            "state": state, "created_at": time.time(), "keyed": key is not None}
    body["seal"] = _mac(body, key)
    return body


def unseal(blob: Any, cls: type, key: bytes | None) -> dict[str, Any]:
    """Check a snapshot given back by a client for an env of ``cls``; its fields if every rule
    holds, else ``SnapshotError`` naming the broken rule and what to do."""
    if not isinstance(blob, dict) or not blob.keys() >= _FIELDS or blob.keys() - _FIELDS:
        given = sorted(blob) if isinstance(blob, dict) else type(blob).__name__
        raise SnapshotError(
            "Not a snapshot: expected the object a `snapshot` call returned, with exactly the fields "
            f"{sorted(_FIELDS)}; got {given}. Pass the snapshot unchanged.", data={"reason": "malformed"})
    if blob["format"] != FORMAT:
        raise SnapshotError(f"Unknown snapshot format {blob['format']!r}; this server reads {FORMAT!r}.",
                            data={"reason": "malformed", "format": blob["format"]})
    name, version = env_identity(cls)
    if blob["env"] != name:
        raise SnapshotError(
            f"The snapshot is of env {blob['env']!r}, but this server serves {name!r}: restore it on a "
            "server of the env it was taken from.", data={"reason": "other_env", "snapshot_env": blob["env"]})
    if blob["env_version"] != version:
        raise SnapshotError(
            f"The snapshot was taken with version {blob['env_version']!r} of the env, this server runs "
            f"{version!r}: an env's snapshot data may change between versions, so restore it on a server "
            "running the same version.", data={"reason": "other_version", "snapshot_version": blob["env_version"]})
    if type(blob["step_count"]) is not int or blob["step_count"] < 0 or not isinstance(blob["state"], dict):
        raise SnapshotError("Malformed snapshot: step_count must be a non-negative integer and state an object.",
                            data={"reason": "malformed"})
    created = blob["created_at"]
    if not isinstance(created, (int, float)) or isinstance(created, bool) or not math.isfinite(created):
        raise SnapshotError("Malformed snapshot: created_at must be a finite number.", data={"reason": "malformed"})
    expected = _mac(blob, key)
    if not isinstance(blob["seal"], str) or not hmac.compare_digest(blob["seal"], expected):
        why = ("it was altered after it was taken, or sealed with another key" if key is not None or blob["keyed"]
               else "it was altered after it was taken")
        fix = (f" Servers that accept each other's snapshots must share {KEY_ENV} (or the same --token)."
               if key is not None or blob["keyed"] else "")
        raise SnapshotError(f"The snapshot's seal does not match: {why}.{fix}", data={"reason": "tampered"})
    return blob


def rng_state(rng: random.Random) -> list[Any]:
    """``rng``'s state as JSON data (for ``Environment.snapshot``)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def set_rng_state(rng: random.Random, data: Any) -> None:
    """Set ``rng`` to a state ``rng_state`` returned; ``ValueError`` if ``data`` is not one."""
    try:
        version, internal, gauss = data
        rng.setstate((int(version), tuple(int(x) for x in internal), gauss))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a random generator state: {exc}") from None
