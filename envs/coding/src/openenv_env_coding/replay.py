"""Coding's hidden tests, judged outside the solution's process.

A test is Python source that calls the solution's functions and checks what they return. Running
both in one process would let the solution decide that process's verdict (an always-equal result,
a patched ``exec`` or ``AssertionError``, a trace hook, a walk to the harness's frame...). So each
test is played twice:

1. In the sandbox (``harness``, one ``grade_copy`` per test): the solution's module runs, then the
   test, with every name it calls from the solution bound to a recorder (``_plain.Recorder``) that
   calls the solution on a copy of the arguments and records, in order, the call and its outcome as
   *plain data* (``_plain.literal``: exact builtin types, recursively, never the object's own
   methods): the value returned, or the exception raised (its type's name and message), and the
   arguments as the solution left them. The records come back as the verdict's payload.
2. In the grader (``judge``, the env's process; no solution code there): the records are read with
   ``ast.literal_eval`` only, then the test's own code runs again with the same names bound to stubs
   that check each call is the next record's (same name, same arguments, types included) and
   return its value (or raise its exception: a builtin type by name, any other as
   ``SolutionError``). The test's verdict there is the grade.

A result that is not plain data (an object of the solution's class, a subclass of ``int``, a
generator, a function) fails its test, naming what was returned. What a test may use is checked
when the task is loaded (``solution_names``): the solution's names only as direct calls
``name(...)`` with plain-data arguments, the builtins of ``SAFE_BUILTINS``, imports of ``MODULES``
(each import in the replay is a fresh copy of the module, so a test's ``math.gcd = None`` changes
nothing in the grader).
"""

from __future__ import annotations

import ast
import base64
import builtins
import importlib
import importlib.util
import marshal
import types
from collections.abc import Callable, Sequence
from importlib.resources import files
from typing import Any

from openenv_env_coding import _plain

__all__ = ["MAX_CALLS", "MAX_PAYLOAD", "MODULES", "SAFE_BUILTINS", "harness", "judge", "solution_names"]

#: Calls of the solution one test may make.
MAX_CALLS = 1000
#: Bytes of records one test's grading may send back (below the grading limits' ``output_bytes``).
MAX_PAYLOAD = 48 * 1024
#: Modules a test may import (the replay imports a fresh copy of each).
MODULES = ("bisect", "cmath", "collections", "functools", "heapq", "itertools", "math", "operator", "re",
           "statistics", "string")
#: Builtins a test may use (``print`` prints nothing in the replay; ``__import__`` imports ``MODULES``).
SAFE_BUILTINS = ("abs", "all", "any", "ascii", "bin", "bool", "bytes", "callable", "chr", "complex", "dict",
                 "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex", "int",
                 "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "oct", "ord",
                 "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum",
                 "tuple", "type", "zip", "__build_class__", "__import__", *sorted(_plain.EXCEPTIONS))
PLAIN = "return plain data (None, bool, int, float, complex, str, bytes, and lists, tuples, dicts, sets of them)"
_RULE = ("coding replays each test outside the solution's process, so a test may call the solution's "
         "functions by name with plain-data arguments, use the builtins it allows and import only "
         + ", ".join(MODULES))


def solution_names(test: str) -> tuple[str, ...]:
    """The solution's names ``test`` calls (its free names that are not builtins), sorted; a
    ``ValueError`` (one line: what and the rule) when the replay cannot play it."""
    try:
        tree = ast.parse(test, "<test>", "exec")
    except SyntaxError as exc:
        raise ValueError(f"not valid Python ({exc.msg}, line {exc.lineno})") from None
    loaded: dict[str, list[ast.Name]] = {}
    bound: set[str] = set()
    callees: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.setdefault(node.id, []).append(node)
            else:
                bound.add(node.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            callees.add(id(node.func))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                wanted = module if isinstance(node, ast.ImportFrom) else alias.name
                if alias.name == "*" or (isinstance(node, ast.ImportFrom) and node.level) or wanted not in MODULES:
                    raise ValueError(f"it imports {'*' if alias.name == '*' else wanted!s}, which the replay does "
                                     f"not provide: {_RULE}")
                bound.add((alias.asname or alias.name).split(".")[0])
    names = []
    for name, uses in sorted(loaded.items()):
        if name in bound:
            continue
        if hasattr(builtins, name):
            if name not in SAFE_BUILTINS:
                raise ValueError(f"it uses the builtin {name}, which the replay does not provide: {_RULE}")
            continue
        if any(id(use) not in callees for use in uses):
            raise ValueError(f"it uses {name} other than as a direct call {name}(...): {_RULE}")
        names.append(name)
    return tuple(names)


_CORE = files("openenv_env_coding").joinpath("_plain.py").read_text(encoding="utf-8")
#: ``_plain`` for the harness: compiled here once (marshalled), with its source as the fallback for a
#: sandbox interpreter whose bytecode differs; compiling it in every grading cost ~2-4 ms a test.
_LOADER = ("import binascii as _binascii, marshal as _marshal, _frozen_importlib_external as _external\n"
           f"if _external.MAGIC_NUMBER == {importlib.util.MAGIC_NUMBER!r}:\n"
           "    exec(_marshal.loads(_binascii.a2b_base64("
           f"{base64.b64encode(marshal.dumps(compile(_CORE, '<_plain>', 'exec'))).decode()!r})))\n"
           f"else:\n    exec(compile({_CORE!r}, '<_plain>', 'exec'))\n")
_HARNESS = """
with open(_SOLUTION_FILE, encoding='utf-8') as _f:
    _source = _f.read()
_solution = {'__name__': 'solution'}
exec(compile(_source, _SOLUTION_FILE, 'exec'), _solution)
_recorder = Recorder(_solution, _MAX_CALLS, _MAX_PAYLOAD)
_test = {'__name__': 'test'}
for _name in _NAMES:
    _test[_name] = _recorder.stub(_name)
try:
    exec(compile(_TEST, '<test>', 'exec'), _test)
except (Exception, Stop):
    pass
__openenv_payload__ = _recorder.payload()
"""


def harness(test: str, names: Sequence[str], solution_file: str) -> str:
    """The check ``grade_copy`` runs in the sandbox: the solution's module, then ``test`` recorded."""
    settings = (f"_SOLUTION_FILE = {solution_file!r}\n_MAX_CALLS = {MAX_CALLS}\n_MAX_PAYLOAD = {MAX_PAYLOAD}\n"
                f"_NAMES = {tuple(names)!r}\n_TEST = {test!r}\n")
    return _LOADER + settings + _HARNESS


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    if level or name not in MODULES:
        raise ImportError(f"the replay imports only {', '.join(MODULES)}")
    module = types.ModuleType(name)
    module.__dict__.update(importlib.import_module(name).__dict__)
    return module


def _builtins() -> dict[str, Any]:
    table = {name: getattr(builtins, name) for name in SAFE_BUILTINS}
    table.update(print=lambda *args, **kwargs: None, __import__=_import)
    return table


def _shown(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [_plain.literal(a) for a in args] + [f"{k}={_plain.literal(v)}" for k, v in kwargs.items()]
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= 80 else text[:76] + "...)"


class _Replay:
    """The grader's stubs: each call must be the next record's; its outcome is the record's."""

    def __init__(self, records: list[Any]) -> None:
        self.records = records
        self.position = 0
        self.failure = ""

    def stub(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, args, kwargs)
        return call

    def fail(self, why: str) -> Any:
        self.failure = self.failure or why
        raise _plain.Stop(self.failure)

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.failure:
            raise _plain.Stop(self.failure)
        try:
            shown = _shown(name, args, kwargs)
        except _plain.NotPlain as exc:
            return self.fail(f"the test passes {exc} to {name}(...): a task's tests pass plain data only "
                             "(the replay cannot hand anything else to the solution's process)")
        if self.position >= len(self.records):
            return self.fail(f"{shown}: the solution's process recorded no result for this call "
                             "(it ended before the test did)")
        record = self.records[self.position]
        self.position += 1
        _name, _args, _kwargs, outcome, value, after = record
        if outcome == "limit":
            return self.fail(f"{shown}: {value[:120]}")
        if _name != name or not _plain.same(_args, args) or not _plain.same(_kwargs, kwargs):
            return self.fail(f"{shown}: the solution's process recorded another call here ({_name[:40]}(...))")
        if outcome == "opaque":
            return self.fail(f"{shown} {value[:120]}, which cannot be compared outside the solution's process: "
                             + PLAIN)
        if after is not None and (len(after[0]) != len(args) or after[1].keys() != kwargs.keys()):
            return self.fail(f"{shown}: the solution's process recorded other arguments after the call")
        return _plain.deliver(args, kwargs, record)


def judge(test: str, names: Sequence[str], payload: str) -> str:
    """Replay ``test`` on the records in ``payload``: "" when it passes, else why it failed."""
    if not payload:
        return "the solution's process recorded no results (it ended before the test did)"
    if len(payload) > MAX_PAYLOAD + 4096:
        return f"the solution's process sent more than {MAX_PAYLOAD} bytes of results"
    try:
        records = _plain.read_records(payload)
    except ValueError as exc:
        return f"the solution's process sent malformed results: {exc}"
    if len(records) > MAX_CALLS + 1:  # the last may say the limit was hit
        return f"the solution's process recorded more than {MAX_CALLS} calls"
    replay = _Replay(records)
    namespace: dict[str, Any] = {"__name__": "test", "__builtins__": _builtins()}
    namespace.update({name: replay.stub(name) for name in names})
    try:
        exec(compile(test, "<test>", "exec"), namespace)
    except _plain.Stop:
        pass
    except Exception as exc:
        if not replay.failure:
            message = str(exc)
            return type(exc).__name__ + (f": {message[:300]}" if message else "")
    if replay.failure:
        return replay.failure
    if replay.position != len(records):
        return "the solution's process recorded more calls than the test made"
    return ""
