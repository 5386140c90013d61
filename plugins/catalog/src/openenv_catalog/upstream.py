"""Reading upstream OpenEnv's catalog snapshots (``schema_version: "0.1-draft"``, written by upstream's
``openenv catalog build``) as ``openenv.catalog/1`` documents, so ``inspect`` and ``discover`` take
either. Facts about the format come from upstream 0.10's shipped JSON Schema and the files its
command writes (a test reads one); only the fields a catalog entry needs are read.

As upstream does, a snapshot must say ``complete: true`` and its ``digest`` must be the sha256 of its
canonical JSON without the digest (sorted keys, no spaces, UTF-8), so a truncated or edited file
is refused instead of half-read.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from openenv_catalog.catalog import PIP_INSTALL

__all__ = ["UPSTREAM_SCHEMA_VERSION", "from_upstream", "is_upstream"]

UPSTREAM_SCHEMA_VERSION = "0.1-draft"


def is_upstream(doc: Any) -> bool:
    """Whether ``doc`` says it is an upstream snapshot."""
    return isinstance(doc, dict) and "schema_version" in doc and "schema" not in doc


def _digest(doc: dict[str, Any]) -> str:
    body = {k: v for k, v in doc.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _entry(item: dict[str, Any]) -> dict[str, Any]:
    card = item["data"]
    source = card["source"]
    uri, revision, path = source["uri"], source["revision"], source["path"]
    return {
        "name": card["name"],
        "version": None,  # upstream's card carries no package version
        "description": _text(item.get("description")) or _text(card.get("description")) or "",
        "tags": [t for t in item.get("tags") or [] if isinstance(t, str)],
        "examples": [q for q in item.get("representativeQueries") or [] if isinstance(q, str)],
        "tools": [],  # upstream declares an agent-tools interface, not the tools' names
        "reward_range": None,
        "schemas": {"action": None, "observation": None},
        "tasks": None,
        "source": {"manifest": f"{path}/openenv.yaml", "package": path, "revision": revision},
        "install": {"dist": None, "path": path,
                    "command": f"{PIP_INSTALL} 'git+{uri}@{revision}#subdirectory={path}'"},
    }


def from_upstream(doc: dict[str, Any], *, source: str) -> dict[str, Any]:
    """The ``openenv.catalog/1`` document of upstream snapshot ``doc``; ``ValueError`` says what is wrong."""
    version = doc.get("schema_version")
    if version != UPSTREAM_SCHEMA_VERSION:
        raise ValueError(f"upstream catalog schema_version {version!r} is not supported (this version reads "
                         f"{UPSTREAM_SCHEMA_VERSION!r}); rebuild it with `openenv catalog build`")
    if doc.get("complete") is not True:
        raise ValueError("the upstream catalog is incomplete (complete: false): fix the issues its build "
                         "reported and build it again")
    if doc.get("digest") != _digest(doc):
        raise ValueError("the upstream catalog does not match its digest (edited or truncated): build it again")
    try:
        origin = doc["source"]
        return {
            "schema": "openenv.catalog/1",
            "source": {"repository": origin["uri"], "revision": origin["revision"], "ref": origin["revision"],
                       "root": doc["inventory"]["root"]},
            "entries": sorted((_entry(item) for item in doc["entries"]), key=lambda e: e["name"]),
        }
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not an upstream {UPSTREAM_SCHEMA_VERSION} catalog: field {exc} is missing or "
                         "malformed; rebuild it") from None
