"""Per-connection state of the ``/ws`` endpoint and the small helpers its dispatch uses (the frame
loop itself is the kernel's ``openenv.frameloop``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qsl

from openenv.errors import ValidationError
from openenv.sessions import Session
from openenv.types import StepOutcome

from .frames import DATA_REQUIRED, ENVELOPE_KEYS, SESSION_TARGETED, SESSIONS_KEYS, SNAPSHOT_KEYS, STEP_BATCH_KEYS

__all__ = ["ABSENT", "Conn", "bad_payload", "query_session_id", "unknown_session"]

ABSENT: Any = object()


class Conn:
    """Per-connection state: its sessions and what the client negotiated."""

    __slots__ = ("allowed", "binary_images", "components", "fatal", "ids", "multiplex", "opened", "owner", "render",
                 "session", "step_batch", "step_kwargs")

    def __init__(self, session: Session, owner: str | None, components: bool = False) -> None:
        self.session = session  # the connection's first session (owned, or attached with ?session_id=)
        self.owner = owner
        #: The upgrade asked for a server rubric's components (docs/protocol.md §2.7).
        self.components = components
        #: A step's outcome -> its wire payload, for this connection.
        self.render: Callable[[StepOutcome], dict[str, Any]] = partial(StepOutcome.payload, components=components)
        #: Sessions opened on this connection with ``open`` (the ``sessions`` extension), by id.
        self.opened: dict[str, Session] = {}
        self.allowed = ENVELOPE_KEYS
        self.ids = False
        self.step_kwargs = False
        self.step_batch = False
        self.multiplex = False
        #: Observation images go as binary frames after the JSON frame (docs/protocol.md §12).
        self.binary_images = False
        self.fatal = False

    def grant(self, extensions: list[str]) -> None:
        self.ids = "ids" in extensions
        self.step_kwargs = "step_kwargs" in extensions
        self.step_batch = "step_batch" in extensions
        self.multiplex = "sessions" in extensions
        self.binary_images = "binary_images" in extensions
        allowed = dict(ENVELOPE_KEYS)
        if self.step_kwargs:
            allowed["step"] = allowed["step"] | {"kwargs"}
        if self.step_batch:
            allowed["step_batch"] = STEP_BATCH_KEYS
        if "tasks" in extensions:
            allowed["tasks"] = STEP_BATCH_KEYS  # {"type", "data"}: a Task API query
        if "snapshot" in extensions:
            allowed.update(SNAPSHOT_KEYS)
        if self.multiplex:
            allowed.update(SESSIONS_KEYS)
            for kind in SESSION_TARGETED & allowed.keys():
                allowed[kind] = allowed[kind] | {"session_id"}
        if self.ids:
            allowed = {t: keys | {"id"} for t, keys in allowed.items()}
        self.allowed = allowed

    def lookup(self, sid: Any) -> Session | None:
        """The session of this connection with id ``sid`` (its first, or one it opened)."""
        if sid == self.session.id:
            return self.session
        return self.opened.get(sid) if type(sid) is str else None

    def target(self, frame: dict[str, Any]) -> Session:
        """The session a frame names with ``session_id`` (its first session when it names none)."""
        if "session_id" not in frame:
            return self.session
        session = self.lookup(frame["session_id"])
        if session is None:
            raise unknown_session(["session_id"], frame["session_id"])
        return session


def bad_payload(frame: dict[str, Any], ftype: str, allowed: frozenset[str]) -> bool:
    """Whether ``data``/``kwargs`` break their rules (keys already known to be allowed)."""
    if "data" in allowed:
        data = frame.get("data", ABSENT)
        if data is ABSENT:
            if ftype in DATA_REQUIRED:
                return True
        elif type(data) is not dict:
            return True
    return "kwargs" in frame and type(frame["kwargs"]) is not dict


def unknown_session(loc: list[Any], sid: Any) -> ValidationError:
    return ValidationError(
        f"Unknown session_id {sid!r} on this connection: name the connection's first session (its id "
        "is in the hello reply) or one opened on it with {\"type\":\"open\"}.",
        data={"errors": [{"type": "unknown_session", "loc": loc, "msg": "Unknown session on this connection",
                          "input": sid}]})


def query_session_id(scope: dict[str, Any]) -> str:
    query = scope.get("query_string") or b""
    if not query:
        return ""
    value = ""
    for key, val in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if key == "session_id":
            value = val  # the last one wins, as in Starlette's query_params.get()
    return value
