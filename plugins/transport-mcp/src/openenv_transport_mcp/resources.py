"""The Task API as MCP resources (docs/protocol.md §13).

Every answer comes from the server's ``TaskService`` (``openenv.task_api``), the one owner of the
Task API rules, so MCP answers what HTTP and ``/ws`` answer. No resource needs a session, so none
builds an env. The URIs (split names and task ids percent-encoded):

* ``openenv://tasks`` — the env's splits: ``{"env_name", "splits": [split, ...]}``;
* ``openenv://tasks/{split}`` — a split's tasks: ``{"split", "num_tasks", "tasks": [task, ...]}``;
  ``?start=&stop=`` narrows it to ``[start, stop)``;
* ``openenv://tasks/{split}/{index}`` — one task by position: ``{"task": task}``;
* ``openenv://task/{task_id}`` — one task by id: ``{"task": task}``.

``resources/list`` names the splits listing and one resource per split (never one per task: a
10k-task split stays one entry); ``resources/templates/list`` names the four forms. Errors are
JSON-RPC errors whose ``data`` is the OpenEnv error (``code``, ``reason``, ``splits``,
``did_you_mean``, ...) plus the ``uri``: an unknown split, task id or URI, or an env that declares
no tasks, is ``-32002`` (MCP's "resource not found"); an index out of range or a bad ``start``/
``stop`` is ``-32602``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote

from openenv.errors import OpenEnvError, did_you_mean
from openenv.task_api import TaskIndexError
from openenv.wire import dumps_bytes
from openenv_transport_mcp.jsonrpc import INVALID_PARAMS, RequestError

if TYPE_CHECKING:
    from openenv.task_api import TaskService

__all__ = ["RESOURCE_NOT_FOUND", "SCHEME", "TASKS_URI", "TaskResources", "split_uri", "task_uri"]

#: MCP's error code for a resource that does not exist (spec, "Resources" > "Error Handling").
RESOURCE_NOT_FOUND = -32002
SCHEME = "openenv://"
TASKS_URI = SCHEME + "tasks"
_JSON = "application/json"
_TEMPLATES = (
    ("openenv://tasks/{split}", "tasks of a split",
     "Every task of the split; add ?start=&stop= for the tasks in [start, stop)."),
    ("openenv://tasks/{split}/{index}", "task by position", "The task at index (0-based) of the split."),
    ("openenv://task/{task_id}", "task by id", "The task with this id (percent-encoded)."),
)
_FORMS = ("openenv://tasks", *(t[0] for t in _TEMPLATES))


def split_uri(split: str) -> str:
    """The URI of ``split``'s task listing."""
    return f"{TASKS_URI}/{quote(split, safe='')}"


def task_uri(task_id: str) -> str:
    """The URI of the task with ``task_id``."""
    return f"{SCHEME}task/{quote(task_id, safe='')}"


class TaskResources:
    """``resources/list``, ``resources/templates/list`` and ``resources/read`` over one ``TaskService``."""

    def __init__(self, service: TaskService | None) -> None:
        self.service = service

    @property
    def declared(self) -> bool:
        """Whether the env declares tasks (then ``initialize`` advertises the capability)."""
        return self.service is not None and self.service.declared

    def list(self) -> dict[str, Any]:
        if not self.declared:
            return {"resources": []}
        assert self.service is not None
        name = self.service.env_name
        entries = [{"uri": TASKS_URI, "name": "splits", "title": f"{name}: splits",
                    "description": "The env's splits: name, type (train/validation/test) and number of tasks.",
                    "mimeType": _JSON}]
        for split in self.service.splits():
            entries.append({"uri": split_uri(split["name"]), "name": f"tasks/{split['name']}",
                            "title": f"{name}: {split['name']} tasks",
                            "description": f"The {split['num_tasks']} tasks of the {split['type']} split "
                                           f"'{split['name']}'.", "mimeType": _JSON})
        return {"resources": entries}

    def templates(self) -> dict[str, Any]:
        return {"resourceTemplates": [{"uriTemplate": uri, "name": name, "description": text, "mimeType": _JSON}
                                      for uri, name, text in _TEMPLATES]}

    def read(self, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise RequestError(INVALID_PARAMS, "Invalid params: 'uri' is required and must be a string, e.g. "
                               f"'{TASKS_URI}'", data={"forms": list(_FORMS)})
        try:
            text = self._read(uri)
        except OpenEnvError as exc:
            code = INVALID_PARAMS if isinstance(exc, TaskIndexError) else RESOURCE_NOT_FOUND
            data = {k: v for k, v in exc.to_wire().items() if k != "message"}
            raise RequestError(code, exc.message, data={**data, "uri": uri}) from None
        return {"contents": [{"uri": uri, "mimeType": _JSON, "text": text}]}

    def _read(self, uri: str) -> str:
        if not uri.startswith(SCHEME):
            raise _not_found(uri, f"'{uri}' is not an OpenEnv task resource; task resources start with "
                                  f"'{SCHEME}'.")
        path, _, query = uri[len(SCHEME):].partition("?")
        head, *rest = path.split("/")
        service = self._service()
        if head == "tasks" and not rest:
            return _text({"env_name": service.env_name, "splits": service.splits()})
        if head == "tasks" and len(rest) == 1 and rest[0]:
            split = unquote(rest[0])
            start, stop = _bounds(query)
            if start is None and stop is None:
                # The cached listing is spliced in as bytes: a 10k-task split is never re-serialised.
                prefix = b'{"split":' + dumps_bytes(split) + b',"num_tasks":'
                listing = service.tasks_json(split)
                return (prefix + str(service.num_tasks(split)).encode() + b',"tasks":' + listing + b"}").decode()
            return _text({"split": split, "num_tasks": service.num_tasks(split),
                          "tasks": service.task_range(split, start, stop)})
        if head == "tasks" and len(rest) == 2 and rest[0]:
            split, raw = unquote(rest[0]), unquote(rest[1])
            if not raw.isdigit():
                raise RequestError(INVALID_PARAMS, f"Invalid params: the task index in '{uri}' must be a "
                                   f"non-negative integer, got '{raw}'", data={"uri": uri, "index": raw})
            return _text({"task": service.task(split, int(raw))})
        if head == "task" and len(rest) == 1 and rest[0]:
            return _text({"task": service.get(unquote(rest[0]))})
        hint = did_you_mean(head, ("tasks", "task")) if head not in ("tasks", "task") else ""
        raise _not_found(uri, f"Unknown task resource '{uri}'.{hint}")

    def _service(self) -> TaskService:
        if self.service is None:  # a server built without the kernel's create_app
            from openenv.tasks import no_tasks_error

            raise no_tasks_error("this environment", "list its tasks")
        return self.service


def _not_found(uri: str, message: str) -> RequestError:
    return RequestError(RESOURCE_NOT_FOUND, f"{message} Resource URIs: {', '.join(_FORMS)}.",
                        data={"uri": uri, "code": "VALIDATION_ERROR", "forms": list(_FORMS)})


def _bounds(query: str) -> tuple[int | None, int | None]:
    """``start``/``stop`` from a listing URI's query string."""
    out: dict[str, int | None] = {"start": None, "stop": None}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in out:
            hint = did_you_mean(key, out)
            raise RequestError(INVALID_PARAMS, f"Invalid params: unknown query parameter '{key}'.{hint} A "
                               "listing takes start and stop.", data={"parameter": key})
        try:
            out[key] = int(value)
        except ValueError:
            raise RequestError(INVALID_PARAMS, f"Invalid params: '{key}' must be an integer, got '{value}'",
                               data={"parameter": key, "value": value}) from None
    return out["start"], out["stop"]


def _text(value: Any) -> str:
    return dumps_bytes(value).decode()
