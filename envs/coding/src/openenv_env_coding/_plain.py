"""Plain data and the outcome of one recorded call: code shared by the two sides of coding's grading.

This module is imported by the grader (``replay``) and its whole source is also pasted into the
recording harness that runs in the sandbox, so both sides turn a call's record into what the test
sees in exactly the same way. It imports only ``ast``, ``typing`` and ``collections.abc``, and uses only builtins.

Plain data: ``None``, ``bool``, ``int``, ``float`` (finite, or an infinity), ``complex`` (finite),
``str``, ``bytes``, and ``list``, ``tuple``, ``dict``, ``set`` of plain data, checked by exact type
(a subclass is not plain), never through the object's own methods, at most ``MAX_DEPTH`` deep.
"""

import ast
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 32
#: The exception classes a recorded exception is raised again as (by name); any other name is
#: raised as ``SolutionError("<name>: <message>")``.
EXCEPTIONS = {cls.__name__: cls for cls in (
    ArithmeticError, AssertionError, AttributeError, EOFError, Exception, IndexError, KeyError, LookupError,
    MemoryError, NameError, NotImplementedError, OverflowError, RecursionError, RuntimeError, StopIteration,
    TypeError, UnboundLocalError, UnicodeError, ValueError, ZeroDivisionError)}
#: What a record's ``outcome`` may be.
OUTCOMES = ("return", "raise", "opaque", "limit")


class NotPlain(Exception):
    """A value is not plain data; the message says what it is (``a <X object>``)."""


class Stop(BaseException):
    """The test cannot go on: the call's result is not plain data, a limit was hit, or the records
    do not match the test's calls (a ``BaseException``: the test's ``except Exception`` does not
    swallow it)."""


class SolutionError(Exception):
    """What the solution raised, when its type is not one of ``EXCEPTIONS``."""


def literal(value: Any, depth: int = 0) -> str:
    """The text ``ast.literal_eval`` reads back as ``value`` (plain data only, else ``NotPlain``)."""
    kind = type(value)
    if depth > MAX_DEPTH:
        raise NotPlain(f"data nested deeper than {MAX_DEPTH} levels")
    if value is None or kind is bool or kind is str or kind is bytes:
        return repr(value)
    if kind is int:
        try:
            return int.__repr__(value)
        except ValueError:
            raise NotPlain("an int of more than 4300 digits") from None
    if kind is float:
        if value != value:
            raise NotPlain("a float nan")
        return float.__repr__(value) if value - value == 0 else ("1e999" if value > 0 else "-1e999")
    if kind is complex:
        if value.real - value.real != 0 or value.imag - value.imag != 0:
            raise NotPlain("a complex with a nan or infinite part")
        return complex.__repr__(value)
    if kind is list:
        return "[" + ", ".join([literal(v, depth + 1) for v in value]) + "]"
    if kind is tuple:
        items = [literal(v, depth + 1) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if kind is set:
        return "{" + ", ".join([literal(v, depth + 1) for v in value]) + "}" if value else "set()"
    if kind is dict:
        return "{" + ", ".join([literal(k, depth + 1) + ": " + literal(v, depth + 1)
                                for k, v in dict.items(value)]) + "}"
    name = kind.__name__ if type(kind.__name__) is str else "?"
    raise NotPlain(f"a <{name[:60]} object>")


def same(a: Any, b: Any, depth: int = 0) -> bool:
    """``a`` and ``b`` are the same plain data, types included (``1``, ``1.0`` and ``True`` differ)."""
    if type(a) is not type(b) or depth > MAX_DEPTH:
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y, depth + 1) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k], depth + 1) for k in a)
    return bool(a == b)


def sync(target: Any, value: Any, depth: int = 0) -> None:
    """Make the mutable parts of ``target`` (the test's own argument) equal ``value`` (the argument
    as the solution left it), in place."""
    if depth > MAX_DEPTH:
        return
    if type(target) is list and type(value) is list:
        if len(target) != len(value):
            target[:] = value
            return
        for i, item in enumerate(value):
            if type(target[i]) in (list, dict, set, tuple) and type(item) is type(target[i]):
                sync(target[i], item, depth + 1)
            else:
                target[i] = item
    elif type(target) is dict and type(value) is dict:
        if target.keys() != value.keys():
            target.clear()
            target.update(value)
            return
        for key, item in value.items():
            if type(target[key]) in (list, dict, set, tuple) and type(item) is type(target[key]):
                sync(target[key], item, depth + 1)
            else:
                target[key] = item
    elif type(target) is set and type(value) is set:
        target.clear()
        target.update(value)
    elif type(target) is tuple and type(value) is tuple and len(target) == len(value):
        for item, new in zip(target, value, strict=True):
            sync(item, new, depth + 1)


def deliver(args: tuple[Any, ...], kwargs: dict[str, Any], record: tuple[Any, ...]) -> Any:
    """What the test sees of one recorded call: its arguments updated as the solution left them,
    then the recorded value returned or the recorded exception raised (``Stop`` for a result that is
    not plain data or a limit hit)."""
    _name, _args, _kwargs, outcome, value, after = record
    if after is not None:
        for position, item in enumerate(after[0]):
            if position < len(args):
                sync(args[position], item)
        for key, item in after[1].items():
            if key in kwargs:
                sync(kwargs[key], item)
    if outcome == "return":
        return value
    if outcome == "raise":
        kind, message = value
        if kind in EXCEPTIONS:
            raise EXCEPTIONS[kind](message)
        raise SolutionError(f"{kind}: {message}")
    raise Stop(value)


def read_records(text: str) -> list[Any]:
    """The records in ``text`` (``ast.literal_eval`` only, then every field's type checked), or
    ``ValueError`` naming what is wrong."""
    try:
        records = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ValueError(f"not plain data ({type(exc).__name__})") from None
    if type(records) is not list:
        raise ValueError("not a list of records")
    for record in records:
        if type(record) is not tuple or len(record) != 6:
            raise ValueError("a record is not a 6-tuple")
        name, args, kwargs, outcome, value, after = record
        if type(name) is not str or type(args) is not tuple or type(kwargs) is not dict or outcome not in OUTCOMES:
            raise ValueError("a record's name, arguments or outcome is malformed")
        if after is not None and (type(after) is not tuple or len(after) != 2 or type(after[0]) is not tuple
                                  or type(after[1]) is not dict):
            raise ValueError("a record's arguments-after is malformed")
        if outcome == "raise" and (type(value) is not tuple or len(value) != 2
                                   or not all(type(v) is str for v in value)):
            raise ValueError("a recorded exception is malformed")
        if outcome in ("opaque", "limit") and type(value) is not str:
            raise ValueError("a record's reason is malformed")
    return records


class Recorder:
    """The sandbox side: each stub calls the solution's function on a copy of the test's arguments
    and records, in order, ``(name, args, kwargs, outcome, value, after)`` as literal text; the
    test then sees what the grader's replay will show it (``deliver`` of the record read back)."""

    def __init__(self, solution: dict[str, Any], max_calls: int, max_bytes: int) -> None:
        self.solution, self.max_calls, self.max_bytes = solution, max_calls, max_bytes
        self.texts: list[str] = []
        self.size = 0

    def stub(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, args, kwargs)
        return call

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            args_text, kwargs_text = literal(args), literal(kwargs)
        except NotPlain as exc:  # the task's own test: the replay reports it
            raise Stop(str(exc)) from None
        limit = f"more than {self.max_calls} calls" if len(self.texts) >= self.max_calls else ""
        text = ""
        if not limit:  # the solution runs only while the records are within their limits
            fields = self.run(name, args_text, kwargs_text)
            text = "(" + ", ".join([repr(name), args_text, kwargs_text] + fields) + ")"
            if self.size + len(text) > self.max_bytes:
                limit = f"results over {self.max_bytes} bytes in all"
        if limit:
            text = "(" + ", ".join([repr(name), "()", "{}", "'limit'", repr(limit), "None"]) + ")"
        self.texts.append(text)
        self.size += len(text) + 2
        return deliver(args, kwargs, ast.literal_eval(text))

    def run(self, name: str, args_text: str, kwargs_text: str) -> list[str]:
        """``[outcome, value, after]`` of one call of the solution's ``name``, as literal texts."""
        function = self.solution.get(name)
        if function is None:
            return ["'raise'", repr(("NameError", f"name {name!r} is not defined")), "None"]
        args, kwargs = ast.literal_eval(args_text), ast.literal_eval(kwargs_text)
        before = literal((args, kwargs))
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            try:
                message = str(exc)
            except Exception:
                message = "?"
            fields = ["'raise'", repr((str(type(exc).__name__)[:60], str(message)[:300]))]
        else:
            try:
                fields = ["'return'", literal(result)]
            except NotPlain as exc:
                fields = ["'opaque'", repr("returned " + str(exc))]
        try:
            after = literal((args, kwargs))
        except NotPlain as exc:
            return ["'opaque'", repr("left " + str(exc) + " in its arguments"), "None"]
        return fields + ["None" if after == before else after]

    def payload(self) -> str:
        return "[" + ", ".join(self.texts) + "]"
