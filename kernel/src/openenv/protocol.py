"""The frame protocol's vocabulary, in one place: frame types, protocol version, extension names,
and the parsing of the ``hello`` reply and of the reply frames a client expects.

Every part of OpenEnv that speaks frames (the client, the WebSocket transport, the readiness probe)
names them from here, so a frame type or an extension is spelled exactly once.

A frame is a JSON object ``{"type": <frame type>, "data": ...}``. The upstream dialect has the
frames ``reset``/``step``/``state``/``close``/``mcp`` (client → server) and ``observation``/
``state``/``mcp``/``error`` (server → client). Everything else exists only after the client asked
for it in a ``hello`` frame and the server granted it (the *extensions*).

Standard library only, and cheap to import: the server's hot path and the CLI both import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from openenv.errors import ProtocolError

__all__ = [
    "CLIENT_WANTS",
    "EXTENSIONS",
    "EXT_BINARY_IMAGES",
    "EXT_IDS",
    "EXT_SESSIONS",
    "EXT_TASKS",
    "EXT_STEP_BATCH",
    "EXT_STEP_KWARGS",
    "EXT_SNAPSHOT",
    "PROTOCOL",
    "Hello",
    "T_CLOSE",
    "T_CLOSED",
    "T_CLOSE_SESSION",
    "T_ERROR",
    "T_HELLO",
    "T_MCP",
    "T_OBSERVATION",
    "T_OBSERVATIONS",
    "T_OPEN",
    "T_OPENED",
    "T_RESET",
    "T_RESTORE",
    "T_SNAPSHOT",
    "T_STATE",
    "T_STEP",
    "T_STEP_BATCH",
    "T_STEP_MANY",
    "T_TASKS",
    "expect",
    "expect_list",
    "frame",
    "hello_frame",
    "parse_hello",
    "reward",
]

#: Protocol name and version, sent in the ``hello`` reply and in ``GET /capabilities``.
PROTOCOL: Final = "openenv-ws/2"

# -- frame types ----------------------------------------------------------------------------------
# Upstream dialect, client → server.
T_RESET: Final = "reset"
T_STEP: Final = "step"
T_STATE: Final = "state"  # also the reply to a ``state`` frame
T_CLOSE: Final = "close"
T_MCP: Final = "mcp"  # also the reply to an ``mcp`` frame
# Upstream dialect, server → client.
T_OBSERVATION: Final = "observation"
T_ERROR: Final = "error"
# Ours: negotiation (always allowed; upstream servers answer it with ``UNKNOWN_TYPE``).
T_HELLO: Final = "hello"
# Extension ``step_batch``: many steps of one session in one frame, answered by ``observations``.
T_STEP_BATCH: Final = "step_batch"
T_OBSERVATIONS: Final = "observations"
# Extension ``sessions``: several sessions on one connection.
T_OPEN: Final = "open"
T_OPENED: Final = "opened"
T_CLOSE_SESSION: Final = "close_session"
T_CLOSED: Final = "closed"
T_STEP_MANY: Final = "step_many"
# Extension ``tasks``: the Task API (splits, listing, lookup by id), answered by ``tasks``.
T_TASKS: Final = "tasks"
# Extension ``snapshot``: ``snapshot`` (answered by ``snapshot`` with the sealed snapshot) and
# ``restore`` (data: a snapshot; answered by ``observation``), see openenv.snapshots.
T_SNAPSHOT: Final = "snapshot"
T_RESTORE: Final = "restore"

# -- extensions -----------------------------------------------------------------------------------
EXT_STEP_KWARGS: Final = "step_kwargs"
EXT_IDS: Final = "ids"
EXT_STEP_BATCH: Final = "step_batch"
EXT_SESSIONS: Final = "sessions"
EXT_TASKS: Final = "tasks"
EXT_SNAPSHOT: Final = "snapshot"
#: Extension ``binary_images``: an observation's ``Image`` fields travel as binary frames after its
#: JSON frame (docs/protocol.md §12, binary_images). A client asks for it only when told to
#: (``EnvClient(binary_images=True)``): it must read those frames.
EXT_BINARY_IMAGES: Final = "binary_images"
#: Every extension a server may grant, in the order the reference server grants them.
EXTENSIONS: Final = (EXT_STEP_KWARGS, EXT_IDS, EXT_STEP_BATCH, EXT_SESSIONS, EXT_TASKS, EXT_SNAPSHOT,
                     EXT_BINARY_IMAGES)
#: What the kernel client asks for in its ``hello`` (it never uses ``ids``).
CLIENT_WANTS: Final = (EXT_STEP_KWARGS, EXT_STEP_BATCH, EXT_SESSIONS, EXT_TASKS, EXT_SNAPSHOT)


def frame(kind: str, data: Any = None, **extra: Any) -> dict[str, Any]:
    """``{"type": kind, "data": data, **extra}`` (``data`` left out when ``None``)."""
    out: dict[str, Any] = {"type": kind}
    if data is not None:
        out["data"] = data
    out.update(extra)
    return out


def hello_frame(want: tuple[str, ...] | list[str] = CLIENT_WANTS) -> dict[str, Any]:
    """The ``hello`` frame that asks for the extensions ``want``."""
    return {"type": T_HELLO, "data": {"want": list(want)}}


@dataclass(frozen=True)
class Hello:
    """What a server said in its ``hello`` reply. Missing or malformed fields read as absent."""

    extensions: frozenset[str] = field(default_factory=frozenset)
    session_id: str | None = None
    protocol: str | None = None
    max_message_bytes: int | None = None
    max_batch_actions: int | None = None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def parse_hello(reply: dict[str, Any]) -> Hello:
    """Parse a ``hello`` reply frame. A reply of another type is a ``ProtocolError``."""
    data = expect(reply, T_HELLO)
    exts = data.get("extensions")
    sid = data.get("session_id")
    proto = data.get("protocol")
    return Hello(
        extensions=frozenset(e for e in exts if isinstance(e, str)) if isinstance(exts, list) else frozenset(),
        session_id=sid if isinstance(sid, str) else None,
        protocol=proto if isinstance(proto, str) else None,
        max_message_bytes=_positive_int(data.get("max_message_bytes")),
        max_batch_actions=_positive_int(data.get("max_batch_actions")),
    )


def expect(reply: dict[str, Any], kind: str) -> dict[str, Any]:
    """The object ``data`` of ``reply``, which must be a ``kind`` frame (``ProtocolError`` otherwise)."""
    if reply.get("type") != kind:
        raise ProtocolError(f"Expected a '{kind}' frame, got {reply.get('type')!r}: {reply!r}")
    data = reply.get("data")
    if not isinstance(data, dict):
        raise ProtocolError(f"Malformed '{kind}' frame: {reply!r}")
    return data


def expect_list(reply: dict[str, Any], kind: str = T_OBSERVATIONS, length: int | None = None) -> list[dict[str, Any]]:
    """The list ``data`` of a ``kind`` frame whose elements are objects (of ``length`` items if given)."""
    items = reply.get("data")
    if reply.get("type") != kind or not isinstance(items, list) or (length is not None and len(items) != length):
        size = "" if length is None else f" with {length} elements"
        raise ProtocolError(f"Expected an '{kind}' frame{size}, got {reply!r}")
    for item in items:
        if not isinstance(item, dict):
                raise ProtocolError(f"Malformed element in '{kind}' frame: {item!r}")
    return items


def reward(value: Any) -> float | None:
    """The ``reward`` of an observation payload as a float (booleans from upstream become 0/1)."""
    if value is None:
        return None
    if isinstance(value, bool):  # upstream servers may send booleans
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        result = float(value)
        if not math.isfinite(result):
                raise ProtocolError(f"Non-finite reward from server: {value!r}")
        return result
    raise ProtocolError(f"Reward must be a number or null, got {value!r}")
