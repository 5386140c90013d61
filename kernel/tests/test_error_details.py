"""``str()`` of every typed client error: upstream's first line, then the details that say what to fix."""

from __future__ import annotations

import pytest

from openenv.errors import _BY_CODE as BY_CODE
from openenv.errors import (
    CapacityError,
    ExecutionError,
    ModeError,
    OpenEnvError,
    ValidationError,
    error_from_wire,
)


def test_validation_error_names_field_reason_and_value() -> None:
    err = error_from_wire({"message": "Invalid message", "code": "VALIDATION_ERROR", "errors": [
        {"type": "less_than_equal", "loc": ["amount"], "msg": "Input should be less than or equal to 3",
         "input": 7, "ctx": {"le": 3}},
        {"type": "extra_forbidden", "loc": ["data", "bogus"], "msg": "Extra inputs are not permitted", "input": "x"},
    ]})
    assert isinstance(err, ValidationError)
    assert str(err).splitlines() == [
        "Server error: Invalid message (code: VALIDATION_ERROR)",
        "  - amount: Input should be less than or equal to 3 [type=less_than_equal, input=7]",
        "  - data.bogus: Extra inputs are not permitted [type=extra_forbidden, input='x']",
    ]


def test_details_are_bounded() -> None:
    huge = "y" * 100_000
    errors = [{"type": "string_too_long", "loc": [f"f{i}"], "msg": "too long", "input": huge} for i in range(50)]
    text = str(ValidationError("Invalid message", data={"errors": errors, "echo": huge}))
    lines = text.splitlines()
    assert len(lines) <= 13 and len(text) < 4000
    assert lines[1].startswith("  - f0: too long [type=string_too_long, input='yyy") and lines[1].endswith("…]")
    assert lines[-1] == "  - … and 40 more (all of them in .data)"


@pytest.mark.parametrize("code", sorted(BY_CODE))
def test_every_typed_error_keeps_upstream_first_line_and_shows_its_data(code: str) -> None:
    err = error_from_wire({"message": "it failed", "code": code, "exception": "KeyError", "operation": "state"})
    assert type(err) is BY_CODE[code]
    first, *rest = str(err).splitlines()
    assert first == f"Server error: it failed (code: {code})"
    assert rest == ["  - exception: KeyError", "  - operation: state"]


def test_details_the_message_already_says_are_not_repeated() -> None:
    cap = CapacityError("Server at capacity: 2/2 sessions active.", data={"active_sessions": 2, "max_sessions": 2})
    assert str(cap) == "Server error: Server at capacity: 2/2 sessions active. (code: CAPACITY_REACHED)"
    assert str(ExecutionError("kaboom")) == "Server error: kaboom (code: EXECUTION_ERROR)"
    mode = ModeError("reset is disabled in production mode", data={"mode": "production", "operation": "reset"})
    assert str(mode).splitlines()[1:] == []
    assert str(OpenEnvError("x", data={"limit": 3})).endswith("\n  - limit: 3")


def test_validation_error_of_builds_one_pydantic_style_error() -> None:
    from openenv.errors import ValidationError

    one = ValidationError.of("column 9 is off the board", kind="bad_column", loc="column", value=9)
    assert one.errors == [{"type": "bad_column", "loc": ["column"], "msg": "column 9 is off the board", "input": 9}]
    assert one.code == "VALIDATION_ERROR" and "column: column 9 is off the board [type=bad_column" in str(one)
    nested = ValidationError.of("bad size", kind="bad_size", loc=["options", "size"])
    assert nested.errors[0]["loc"] == ["options", "size"] and nested.errors[0]["input"] is None
    assert ValidationError.of("no episode", kind="no_episode").errors[0]["loc"] == []
