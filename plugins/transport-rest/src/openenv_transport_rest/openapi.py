"""The OpenAPI 3.1 document and the ``/docs`` page of the HTTP transport.

Built by hand from the Pydantic models (request bodies, the env's action, observation and state
types), so it describes what the server really does (docs/protocol.md §5.8): the session header, the one-shot
behaviour without it, the status codes, which routes exist in the server's mode, and the token.
"""

from __future__ import annotations

import html
from typing import Any

from pydantic import BaseModel

from openenv_transport_rest.models import (
    ONE_SHOT_HEADER,
    SESSION_HEADER,
    ErrorResponse,
    ObservationResponse,
    ResetRequest,
    SessionClosed,
    SessionCreated,
    SessionInfo,
    StepRequest,
    ValidationErrorResponse,
)

__all__ = ["build_openapi", "docs_page"]

_REF = "#/components/schemas/{model}"


class _Components:
    """Collects JSON schemas under ``components.schemas`` and hands out ``$ref``s."""

    def __init__(self) -> None:
        self.schemas: dict[str, Any] = {}

    def add(self, model: type[BaseModel], name: str | None = None) -> dict[str, str]:
        name = name or model.__name__
        if name not in self.schemas:
            schema = model.model_json_schema(ref_template=_REF)
            for def_name, definition in schema.pop("$defs", {}).items():
                self.schemas.setdefault(def_name, definition)
            self.schemas[name] = schema
        return {"$ref": _REF.format(model=name)}


def _json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _response(description: str, schema: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = _json_content(schema)
    out.update(extra)
    return out


def build_openapi(ctx: Any) -> dict[str, Any]:
    """The OpenAPI document for the server described by ``ctx`` (a ``ServerContext``)."""
    comp = _Components()
    err = comp.add(ErrorResponse)
    invalid = comp.add(ValidationErrorResponse)
    obs_ref = comp.add(ObservationResponse)
    action_ref = comp.add(ctx.action_type)
    state_ref = comp.add(ctx.state_type)

    step_schema = StepRequest.model_json_schema(ref_template=_REF)
    step_schema["properties"]["action"] = {
        **action_ref,
        "description": "The action, validated against the env's action schema. Errors are "
        "reported with `loc` relative to the action (e.g. `[\"message\"]`).",
    }
    comp.schemas["StepRequest"] = step_schema
    reset_ref = comp.add(ResetRequest)

    session_param = {
        "name": SESSION_HEADER,
        "in": "header",
        "required": False,
        "schema": {"type": "string"},
        "description": (
            "Session to act on, from `POST /sessions`. With it, `/reset`, `/step` and `/state` "
            "share one env: `/step` continues the `/reset` episode. Without it the request is "
            "one-shot: a transient env is built for it and closed afterwards (upstream OpenEnv "
            "behaviour), it counts against the session capacity, and the reply carries "
            f"`{ONE_SHOT_HEADER}: none`."
        ),
    }
    one_shot_header = {
        ONE_SHOT_HEADER: {
            "description": "`none` when the request ran on a transient env (no session header)",
            "schema": {"type": "string", "enum": ["none"]},
        },
        SESSION_HEADER: {
            "description": "The session the request ran on, when it named one",
            "schema": {"type": "string"},
        },
    }
    unknown = _response("Unknown session_id (or a session owned by another principal)", err)
    capacity = _response(
        "Server at capacity (a one-shot request needs a free session slot too): `code` "
        "CAPACITY_REACHED with `active_sessions` and `max_sessions`", err)
    failure = _response(
        "The env raised (`code` EXECUTION_ERROR, `detail` = the exception text), produced a "
        "non-finite reward (`Non-finite reward: nan`), or could not be built (FACTORY_ERROR). "
        "Upstream answers env exceptions with text/plain `Internal Server Error`; this server "
        "keeps the status and answers JSON.", err)
    body_invalid = _response(
        "Invalid body (`loc` starts at `body`; malformed JSON gives `json_invalid`) or invalid action "
        "(`loc` relative to the action)", invalid)
    too_large = _response("Body larger than the server's max_message_bytes", err)

    control = {"tags": ["Environment control"], "parameters": [session_param]}
    paths: dict[str, Any] = {}
    # Mounted in every mode; in production the session-less form answers 404 MODE_ERROR.
    paths["/reset"] = {"post": {
        **control,
        "summary": "Start a new episode",
        "description": (
            "Reset the session's env (or a transient env, see the session header). Body "
            "optional; `seed` ≥ 0, `episode_id` ≤ 255 characters, other keys are passed to "
            "`reset` when its signature accepts them and dropped otherwise."
        ),
        "requestBody": {"required": False, "content": _json_content(reset_ref)},
        "responses": {
            "200": _response("The first observation", obs_ref, headers=one_shot_header),
            "404": unknown, "413": too_large, "422": body_invalid, "500": failure, "503": capacity,
        },
    }}
    paths["/step"] = {"post": {
        **control,
        "summary": "Apply an action",
        "description": (
            "Step the session's env (or a transient env, which cannot continue any episode). "
            "`timeout_s`, `request_id` and extra keys are passed to `step` when its signature "
            "accepts them."
        ),
        "requestBody": {"required": True, "content": _json_content({"$ref": _REF.format(model="StepRequest")})},
        "responses": {
            "200": _response("The resulting observation", obs_ref, headers=one_shot_header),
            "404": unknown, "413": too_large, "422": body_invalid, "500": failure, "503": capacity,
        },
    }}
    paths["/state"] = {"get": {
        **control,
        "summary": "Read the state",
        "description": "The session's state; without the session header, the state of a freshly built env.",
        "responses": {
            "200": _response("The state, extra keys included", state_ref, headers=one_shot_header),
            "404": unknown, "500": failure, "503": capacity,
        },
    }}
    if ctx.mode == "production":
        for path, method in (("/reset", "post"), ("/step", "post"), ("/state", "get")):
            op = paths[path][method]
            op["description"] = (op.get("description", "") + " This server runs in production mode: "
                                 "send the OpenEnv-Session-Id header; without it the answer is 404 "
                                 "with `code` MODE_ERROR.").strip()
    idle = ctx.sessions.idle_timeout_s
    paths["/sessions"] = {"post": {
        "tags": ["Sessions"],
        "summary": "Create a session",
        "description": (
            "Build an env and reserve a session slot for it. Sessions created over HTTP have no "
            f"live connection: they are closed after {idle} s without a request"
            if idle is not None else
            "Build an env and reserve a session slot for it. Sessions live until closed"
        ) + (". With token auth, only the creating principal can use or close it." if ctx.config.token
             else "."),
        "responses": {
            "201": _response("Created", comp.add(SessionCreated)),
            "500": _response("The env factory failed (`code` FACTORY_ERROR, `factory_name`)", err),
            "503": _response("Server at capacity (`code` CAPACITY_REACHED)", err),
        },
    }}
    id_param = {"name": "session_id", "in": "path", "required": True, "schema": {"type": "string"}}
    paths["/sessions/{session_id}"] = {
        "get": {
            "tags": ["Sessions"], "summary": "Describe a session", "parameters": [id_param],
            "description": "Reading the info does not count as activity for the idle timeout.",
            "responses": {"200": _response("Session info", comp.add(SessionInfo)), "404": unknown},
        },
        "delete": {
            "tags": ["Sessions"], "summary": "Close a session", "parameters": [id_param],
            "description": (
                "Close the env and free the slot. If a WebSocket is attached the session closes "
                "when it detaches (`closed: false, closing: true`)."
            ),
            "responses": {"200": _response("Closed or closing", comp.add(SessionClosed)), "404": unknown},
        },
    }
    snap = {"tags": ["Sessions"], "parameters": [id_param]}
    paths["/sessions/{session_id}/snapshot"] = {"post": {
        **snap, "summary": "Snapshot a session's live episode",
        "description": ("The episode as a sealed JSON object (docs/protocol.md §12), for an env that "
                        "declares SUPPORTS_SNAPSHOT. Give it to `/restore` of any session of a server of "
                        "the same env and version."),
        "responses": {"200": _response("The snapshot"), "404": unknown,
                      "409": _response("No reset yet (`code` SNAPSHOT_ERROR, `reason`)", err),
                      "501": _response("The env does not support snapshots", err)}}}
    paths["/sessions/{session_id}/restore"] = {"post": {
        **snap, "summary": "Continue a snapshot's episode in a session",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {"type": "object"}}}},
        "responses": {"200": _response("The observation at the snapshot's point"), "404": unknown,
                      "422": _response("Refused: malformed, another env or version, a broken seal "
                                       "(`code` SNAPSHOT_ERROR, `reason`)", err)}}}
    info = {"tags": ["Information"]}
    paths["/health"] = {"get": {**info, "summary": "Health check", "security": [],
                                "responses": {"200": _response("`{\"status\": \"healthy\"}`")}}}
    paths["/metadata"] = {"get": {**info, "summary": "Environment metadata",
                                  "responses": {"200": _response("name, description, version, ...")}}}
    paths["/schema"] = {"get": {**info, "summary": "JSON schemas of action, observation, state",
                                "responses": {"200": _response("`{action, observation, state, reset_observation}`")}}}
    paths["/capabilities"] = {"get": {**info, "summary": "Protocol extensions and limits",
                                      "responses": {"200": _response("Capabilities")}}}

    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": f"OpenEnv: {ctx.env_name}",
            "version": "0.10-compatible",
            "description": (
                f"HTTP interface of the `{ctx.env_name}` environment (mode: {ctx.mode}). Create a "
                f"session with `POST /sessions` and send its id in the `{SESSION_HEADER}` header "
                "for multi-step episodes over HTTP. Requests without the header keep upstream "
                "OpenEnv's one-shot semantics. WebSocket (`/ws`) and other transports, when "
                "installed, are not described here."
            ),
        },
        "paths": paths,
        "components": {"schemas": comp.schemas},
    }
    if ctx.config.token:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
        unauthorized = _response("Missing or invalid token", err)
        for path, ops in paths.items():
            if path != "/health":
                for op in ops.values():
                    op["responses"]["401"] = unauthorized
    return doc


def docs_page(doc: dict[str, Any]) -> str:
    """A plain HTML page listing the routes of ``doc``, linking to ``/openapi.json``."""
    rows = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            rows.append(
                f"<tr><td><code>{method.upper()}</code></td><td><code>{html.escape(path)}</code></td>"
                f"<td>{html.escape(op.get('summary', ''))}</td>"
                f"<td>{html.escape(op.get('description', ''))}</td></tr>"
            )
    title = html.escape(doc["info"]["title"])
    intro = html.escape(doc["info"]["description"])
    return (
        "<!doctype html><html><head><meta charset=\"utf-8\">"
        f"<title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}"
        "td{border-top:1px solid #ccc;padding:.4em;vertical-align:top}</style></head><body>"
        f"<h1>{title}</h1><p>{intro}</p>"
        "<p>Machine-readable description: <a href=\"openapi.json\">openapi.json</a> (OpenAPI 3.1).</p>"
        "<table><tr><th>Method</th><th>Path</th><th>Summary</th><th>Details</th></tr>"
        + "".join(rows)
        + "</table></body></html>"
    )
