"""Errors in each provider's own shape, so an agent's SDK raises its usual exception class.

OpenAI (Chat Completions and Responses): ``{"error": {"message", "type", "param", "code"}}``;
Anthropic: ``{"type": "error", "error": {"type", "message"}}``. In a stream, the same body is sent
as a ``data:`` line (OpenAI's SDK raises ``APIError`` on a chunk with ``error``) or as an
``event: error`` (Anthropic's SDK raises on it).
"""

from __future__ import annotations

import json
from typing import Literal

from starlette.responses import JSONResponse

__all__ = ["Dialect", "GatewayError", "error_body", "error_response", "stream_error_event"]

Dialect = Literal["chat", "responses", "anthropic"]

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error",
                 413: "invalid_request_error", 429: "rate_limit_error", 502: "api_error", 503: "api_error",
                 504: "api_error"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 502: "api_error",
                    503: "overloaded_error", 504: "api_error"}


class GatewayError(Exception):
    """A refusal the gateway answers in the agent's dialect: HTTP status, stable code, message."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param


def error_body(dialect: Dialect, status: int, code: str, message: str, param: str | None = None) -> dict[str, object]:
    if dialect == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "api_error"), "param": param,
                      "code": code}}


def error_response(dialect: Dialect, exc: GatewayError) -> JSONResponse:
    return JSONResponse(error_body(dialect, exc.status, exc.code, exc.message, exc.param), status_code=exc.status)


def stream_error_event(dialect: Dialect, status: int, code: str, message: str) -> bytes:
    body = json.dumps(error_body(dialect, status, code, message)).encode()
    if dialect == "anthropic":
        return b"event: error\ndata: " + body + b"\n\n"
    if dialect == "responses":
        return b"event: error\ndata: " + json.dumps({"type": "error", "code": code, "message": message,
                                                     "param": None, "sequence_number": 0}).encode() + b"\n\n"
    return b"data: " + body + b"\n\n"
