"""The Task API: one answer for every transport (docs/protocol.md §13).

``TaskService`` answers list and fetch queries from the server's ``TaskSource`` (the session
manager's ``tasks``); the HTTP routes here, the ``/ws`` ``tasks`` frame and the MCP resources all
call it, so the same question gets the same answer everywhere. No query builds an env: a native
source is queried directly, and a split's full listing is serialised once and cached (sources do
not change while served).

HTTP routes (upstream 0.10's, wire-compatible): ``GET /list_environments``, ``GET /{env}/splits``,
``POST /{env}/tasks`` ``{"split"}``, ``/num_tasks`` ``{"split"}``, ``/task`` ``{"split","index"}``,
``/task_range`` ``{"split","start"?,"stop"?}``; plus ours, ``POST /{env}/task_by_id``
``{"task_id"}``. Errors are ``{"detail": message, ...}``: an unknown env name 404 (upstream's
text), an env without tasks 501 with ``reason: "no_tasks"`` and how to declare them, an unknown
split 400 and an unknown task id 404 with ``did_you_mean`` and ``splits``, an index out of range
400 ``"Invalid task index"`` (upstream's text), a bad body 422 (FastAPI's shape).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, StrictInt
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from openenv.errors import OpenEnvError, ValidationError
from openenv.tasks import NoTasksError, Task, TaskSource, UnknownTaskError, UpstreamTasks, no_tasks_error
from openenv.wire import dumps_bytes, validation_errors

__all__ = ["TaskIndexError", "TaskQuery", "TaskService", "task_routes"]


class TaskIndexError(OpenEnvError):
    """A task index outside its split (wire ``VALIDATION_ERROR``)."""

    default_code = "VALIDATION_ERROR"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitBody(_Body):
    split: str


class TaskBody(_Body):
    split: str
    index: StrictInt


class RangeBody(_Body):
    split: str
    start: StrictInt | None = None
    stop: StrictInt | None = None


class TaskIdBody(_Body):
    task_id: str


class TaskQuery(_Body):
    """A Task API query over a message transport (the ``/ws`` ``tasks`` frame's ``data``)."""

    query: Literal["splits", "list", "count", "task", "get"]
    split: str | None = None
    index: StrictInt | None = None
    start: StrictInt | None = None
    stop: StrictInt | None = None
    task_id: str | None = None


_NEEDS: dict[str, tuple[str, ...]] = {"splits": (), "list": ("split",), "count": ("split",),
                                       "task": ("split", "index"), "get": ("task_id",)}


class TaskService:
    """The Task API of one served env. Every method raises ``OpenEnvError`` subclasses only:
    ``NoTasksError``, ``UnknownTaskError``, ``TaskIndexError``."""

    def __init__(self, source: TaskSource | None, env_name: str) -> None:
        self.source = source
        self.env_name = env_name
        self._listing: dict[str, bytes] = {}

    @property
    def declared(self) -> bool:
        return self.source is not None

    def _source(self, asked: str) -> TaskSource:
        if self.source is None:
            raise no_tasks_error(self.env_name, asked)
        return self.source

    def splits(self) -> list[dict[str, Any]]:
        return [s.model_dump() for s in self._source("list its splits").splits()]

    def num_tasks(self, split: str) -> int:
        return self._source("count tasks").num_tasks(split)

    def task(self, split: str, index: int) -> dict[str, Any]:
        source = self._source("fetch a task")
        if isinstance(source, UpstreamTasks):
            source.check_split(split)
            return self._guard(split, index, lambda: source.env.get_task(split, index))  # type: ignore[no-any-return]
        return self._guard(split, index, lambda: source.task_at(split, index)).model_dump()  # type: ignore[no-any-return]

    def _guard(self, split: str, index: int, fetch: Any) -> Any:
        try:
            return fetch()
        except IndexError:
            n = self._source("fetch a task").num_tasks(split)
            raise TaskIndexError(f"Invalid task index {index} for split '{split}', which has {n} tasks "
                                 f"(0..{n - 1}).", data={"split": split, "index": index, "num_tasks": n}) from None

    def task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        source = self._source("list tasks")
        if isinstance(source, UpstreamTasks):
            source.check_split(split)
            return list(source.env.get_task_range(split, start, stop))
        return [t.model_dump() for t in source.task_range(split, start or 0, stop)]

    def get(self, task_id: str) -> dict[str, Any]:
        task: Task = self._source(f"find task {task_id!r}").get(task_id)
        return task.model_dump()

    def query(self, data: Any) -> dict[str, Any]:
        """Answer one ``TaskQuery``: ``splits`` -> ``{"splits"}``; ``list`` (``split``, optional
        ``start``/``stop``) -> ``{"tasks", "num_tasks"}``; ``count`` -> ``{"num_tasks"}``; ``task``
        (``split``, ``index``) and ``get`` (``task_id``) -> ``{"task"}``."""
        try:
            q = TaskQuery.model_validate(data)
        except PydanticValidationError as exc:
            raise ValidationError("Invalid message", data={"errors": validation_errors(exc, ("data",))}) from None
        missing = [k for k in _NEEDS[q.query] if getattr(q, k) is None]
        if missing:
            raise ValidationError(f"Invalid message: query '{q.query}' needs {', '.join(missing)}.", data={
                "errors": [{"type": "missing", "loc": ["data", k], "msg": "Field required", "input": data}
                           for k in missing]})
        if q.query == "splits":
            return {"splits": self.splits()}
        if q.query == "count":
            return {"num_tasks": self.num_tasks(q.split)}  # type: ignore[arg-type]
        if q.query == "task":
            return {"task": self.task(q.split, q.index)}  # type: ignore[arg-type]
        if q.query == "get":
            return {"task": self.get(q.task_id)}  # type: ignore[arg-type]
        split: str = q.split  # type: ignore[assignment]
        if q.start is None and q.stop is None:
            return {"tasks": orjson.Fragment(self.tasks_json(split)), "num_tasks": self.num_tasks(split)}
        return {"tasks": self.task_range(split, q.start, q.stop), "num_tasks": self.num_tasks(split)}

    def tasks_json(self, split: str) -> bytes:
        """``[task, ...]`` of the whole split as JSON, serialised once per split."""
        cached = self._listing.get(split)
        if cached is None:
            source = self._source("list tasks")
            if isinstance(source, UpstreamTasks):
                source.check_split(split)
                cached = dumps_bytes(list(source.env.list_tasks(split)))
            else:
                cached = dumps_bytes([t.model_dump() for t in source.task_range(split)])
            self._listing[split] = cached
        return cached


# -- HTTP -----------------------------------------------------------------------------------------

def _error(exc: OpenEnvError) -> JSONResponse:
    if isinstance(exc, NoTasksError):
        status = 501  # upstream's status for an env without task methods
    elif isinstance(exc, UnknownTaskError):
        status = 404 if "task_id" in exc.data else 400
    else:
        status = 400
    body = {"detail": "Invalid task index" if isinstance(exc, TaskIndexError) else exc.message, **exc.to_wire()}
    return JSONResponse(body, status_code=status)


async def _body(request: Request, model: type[_Body]) -> _Body | JSONResponse:
    raw = await request.body()
    try:
        data = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return JSONResponse({"detail": [{"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error",
                                         "input": {}, "ctx": {"error": str(exc)}}]}, status_code=422)
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        return JSONResponse({"detail": validation_errors(exc, ("body",))}, status_code=422)


def task_routes(service: TaskService) -> list[BaseRoute]:
    """Upstream 0.10's Task API routes (and ``task_by_id``) answering from ``service``."""
    name = service.env_name

    def unknown_env(request: Request) -> JSONResponse | None:
        given = request.path_params["env_name"]
        if given.lower() != name.lower():
            return JSONResponse({"detail": f"unknown environment {given!r}"}, status_code=404)
        return None

    async def list_environments(_: Request) -> Response:
        return JSONResponse([name])

    async def splits(request: Request) -> Response:
        if (bad := unknown_env(request)) is not None:
            return bad
        try:
            return JSONResponse(service.splits())
        except OpenEnvError as exc:
            return _error(exc)

    def post(model: type[_Body], answer: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            if (bad := unknown_env(request)) is not None:
                return bad
            body = await _body(request, model)
            if isinstance(body, JSONResponse):
                return body
            try:
                return await answer(body)
            except OpenEnvError as exc:
                return _error(exc)
        return endpoint

    async def tasks(body: Any) -> Response:
        listing = service.tasks_json(body.split)
        prefix = b'{"tasks":'
        suffix = b',"env_name":' + dumps_bytes(name) + b"}"
        return Response(prefix + listing + suffix, media_type="application/json")

    async def num_tasks(body: Any) -> Response:
        return JSONResponse({"num_tasks": service.num_tasks(body.split)})

    async def task(body: Any) -> Response:
        return Response(dumps_bytes({"task": service.task(body.split, body.index)}), media_type="application/json")

    async def task_range(body: Any) -> Response:
        return Response(dumps_bytes({"tasks": service.task_range(body.split, body.start, body.stop)}),
                        media_type="application/json")

    async def task_by_id(body: Any) -> Response:
        return Response(dumps_bytes({"task": service.get(body.task_id)}), media_type="application/json")

    return [
        Route("/list_environments", list_environments, methods=["GET"]),
        Route("/{env_name}/splits", splits, methods=["GET"]),
        Route("/{env_name}/tasks", post(SplitBody, tasks), methods=["POST"]),
        Route("/{env_name}/num_tasks", post(SplitBody, num_tasks), methods=["POST"]),
        Route("/{env_name}/task", post(TaskBody, task), methods=["POST"]),
        Route("/{env_name}/task_range", post(RangeBody, task_range), methods=["POST"]),
        Route("/{env_name}/task_by_id", post(TaskIdBody, task_by_id), methods=["POST"]),
    ]
