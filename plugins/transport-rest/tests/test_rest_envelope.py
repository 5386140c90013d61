"""The hand-written ``/step`` and ``/reset`` envelope checks agree with the Pydantic models.

``envelope.step_parts`` / ``reset_data`` skip Pydantic for the bodies clients usually send; for
every body here (valid, lax, invalid) the result must be what ``StepRequest`` / ``ResetRequest``
give: the same arguments in the same key order, or the same 422 body byte for byte.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError as PydanticValidationError

from openenv_transport_rest.asgi import Reply
from openenv_transport_rest.envelope import body_errors, parse_json, reset_data, step_parts
from openenv_transport_rest.models import ResetRequest, StepRequest

ACTION = {"message": "hi"}

STEP_BODIES: list[Any] = [
    {"action": ACTION},
    {"action": {}},
    {"action": ACTION, "timeout_s": 2.5},
    {"action": ACTION, "timeout_s": 5},
    {"action": ACTION, "timeout_s": True},
    {"action": ACTION, "timeout_s": "3"},
    {"action": ACTION, "timeout_s": "abc"},
    {"action": ACTION, "timeout_s": None},
    {"action": ACTION, "timeout_s": 0},
    {"action": ACTION, "timeout_s": 0.0},
    {"action": ACTION, "timeout_s": -0.0},
    {"action": ACTION, "timeout_s": -1.5},
    {"action": ACTION, "timeout_s": [1]},
    {"action": ACTION, "request_id": "r1"},
    {"action": ACTION, "request_id": None},
    {"action": ACTION, "request_id": 5},
    {"action": ACTION, "request_id": ""},
    {"action": ACTION, "request_id": "x" * 255},
    {"action": ACTION, "request_id": "x" * 256},
    {"action": ACTION, "request_id": "é" * 255},
    {"action": ACTION, "request_id": "\U0001f600" * 255},
    {"action": ACTION, "request_id": "\U0001f600" * 256},
    {"request_id": "r", "zeta": 1, "action": ACTION, "timeout_s": 1.0, "alpha": [1, {"b": 2}]},
    {"zeta": None, "timeout_s": 3.0, "action": ACTION},
    {"action": ACTION, "extra": {"nested": True}},
    {"action": ACTION, "timeout_s": 0, "request_id": 7},
    {"action": "x"},
    {"action": None},
    {"action": [1]},
    {"action": 1},
    {"message": "x"},
    {},
    [1, 2],
    "str",
    5,
    1.5,
    True,
]

RESET_BODIES: list[Any] = [
    None,
    {},
    {"seed": 1},
    {"seed": 0, "episode_id": "e"},
    {"episode_id": "e", "seed": 2},
    {"seed": -1},
    {"seed": "5"},
    {"seed": 1.0},
    {"seed": 1.5},
    {"seed": True},
    {"seed": None},
    {"seed": [1]},
    {"seed": 2**62},
    {"episode_id": 5},
    {"episode_id": ""},
    {"episode_id": "x" * 256},
    {"episode_id": "y" * 255},
    {"episode_id": None},
    {"zz": 1, "seed": 3, "aa": 2, "episode_id": "q"},
    {"ignored": True},
    {"episode_id": "e", "zz": [1]},
    [1],
    "x",
    7,
]


def _pydantic_step(body: Any) -> tuple[Any, ...]:
    try:
        model = StepRequest.model_validate(body)
    except PydanticValidationError as exc:
        return ("422", orjson.dumps({"detail": body_errors(exc)}))
    extra = model.model_dump(exclude_unset=True, exclude={"action"})
    return ("ok", orjson.dumps(model.action), orjson.dumps(extra), list(extra))


def _ours_step(body: Any) -> tuple[Any, ...]:
    try:
        action, extra = step_parts(body)
    except Reply as reply:
        assert reply.status == 422
        assert (b"content-type", b"application/json") in reply.headers
        return ("422", reply.body)
    return ("ok", orjson.dumps(action), orjson.dumps(extra), list(extra))


def _pydantic_reset(body: Any) -> tuple[Any, ...]:
    try:
        data = ResetRequest.model_validate({} if body is None else body).model_dump(exclude_unset=True)
    except PydanticValidationError as exc:
        return ("422", orjson.dumps({"detail": body_errors(exc)}))
    return ("ok", orjson.dumps(data), list(data))


def _ours_reset(body: Any) -> tuple[Any, ...]:
    try:
        data = reset_data(body)
    except Reply as reply:
        assert reply.status == 422
        return ("422", reply.body)
    return ("ok", orjson.dumps(data), list(data))


@pytest.mark.parametrize("body", STEP_BODIES, ids=lambda b: ascii(b)[:60])
def test_step_envelope_matches_the_model(body: Any) -> None:
    assert _ours_step(body) == _pydantic_step(body)


@pytest.mark.parametrize("body", RESET_BODIES, ids=lambda b: ascii(b)[:60])
def test_reset_envelope_matches_the_model(body: Any) -> None:
    assert _ours_reset(body) == _pydantic_reset(body)


def test_usual_bodies_take_the_hand_written_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bodies clients send never reach Pydantic (the point of the hand-written checks)."""

    def refuse(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("Pydantic was called for a usual body")

    monkeypatch.setattr(StepRequest, "model_validate", refuse)
    monkeypatch.setattr(ResetRequest, "model_validate", refuse)
    assert step_parts({"action": ACTION}) == (ACTION, {})
    assert step_parts({"action": ACTION, "timeout_s": 2.0, "request_id": "r"}) == (
        ACTION, {"timeout_s": 2.0, "request_id": "r"})
    assert reset_data(None) == {} and reset_data({}) == {}
    assert reset_data({"seed": 1, "episode_id": "e"}) == {"seed": 1, "episode_id": "e"}


@pytest.mark.parametrize("raw, expected", [
    (b"", None),
    (b" \r\n\t ", None),
    (b'{"a":1}', {"a": 1}),
    (b'  [1, 2]  ', [1, 2]),
    (b"null", None),
])
def test_parse_json_values(raw: bytes, expected: Any) -> None:
    assert parse_json(raw) == expected


@pytest.mark.parametrize("raw, pos, msg", [
    (b"{bad", 1, "Expecting property name enclosed in double quotes"),
    (b"not json", 0, "Expecting value"),
    (b'{"a": 1', 7, "Expecting ',' delimiter"),
    (b"[1,", 3, "Expecting value"),
])
def test_parse_json_errors_are_fastapi_422(raw: bytes, pos: int, msg: str) -> None:
    with pytest.raises(Reply) as caught:
        parse_json(raw)
    assert caught.value.status == 422
    assert orjson.loads(caught.value.body) == {"detail": [{"type": "json_invalid", "loc": ["body", pos],
                                                           "msg": "JSON decode error", "input": {},
                                                           "ctx": {"error": msg}}]}
