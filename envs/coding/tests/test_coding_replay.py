"""The replay that judges coding's hidden tests outside the solution's process: what a test may use
(checked when its task is loaded), plain data, and the grader's side on records it is handed."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
from pathlib import Path

import pytest

from openenv_env_coding import _plain
from openenv_env_coding.replay import MAX_CALLS, harness, judge, solution_names
from openenv_env_coding.tasks import TaskError, grade, load_tasks, pass_rate
from openenv_sandbox import default_sandbox, grade_copy

ADD = "assert add(2, 3) == 5"


def _record(name: str, args: tuple[object, ...], outcome: str, value: object, after: object = None) -> str:
    return repr((name, args, {}, outcome, value, after))


def test_a_tests_free_names_are_the_solutions_and_every_one_must_be_a_direct_call() -> None:
    assert solution_names(ADD) == ("add",)
    assert solution_names("import math; math.gcd = None; assert gcd(100, 75) == 25") == ("gcd",)
    assert solution_names("a, b = [0], [1]\nmerge(a, b)\nassert [x for x in a if ok(x)] == a") == ("merge", "ok")
    for test, why in [("assert add is not None", "other than as a direct call add(...)"),
                      ("assert add.__code__ is None", "other than as a direct call"),
                      ("import os\nassert add(1, 2) == 3", "imports os"),
                      ("from math import *\nassert add(1, 2) == 3", "imports *"),
                      ("assert open('solution.py').read()", "builtin open"),
                      ("assert eval('1') == 1", "builtin eval"),
                      ("assert add(2, 3) ==", "not valid Python")]:
        with pytest.raises(ValueError, match=why):
            solution_names(test)


def test_a_task_whose_test_the_replay_cannot_play_is_refused_when_loaded(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "sq", "prompt": "p", "tests": ["assert square(3) == 9"],
                                 "examples": ["assert square.__name__ == 'square'"]}) + "\n")
    with pytest.raises(TaskError) as refused:
        load_tasks(tasks)
    message = str(refused.value)
    assert "\n" not in message and "task 'sq', example 1" in message and "a test may call the solution's" in message
    assert load_tasks() and all(solution_names(t) for task in load_tasks() for t in task.tests)


def test_plain_data_is_checked_by_exact_type_and_read_back_as_itself() -> None:
    for value in [None, True, 0, -7, 2.5, 1e300, math.inf, -math.inf, 1 + 2j, "x'\"\n", b"\x00", [], (), (1,),
                  set(), {1, 2}, {"a": [1, (2, None)], 3: {4.5}}, [[[]]]]:
        text = _plain.literal(value)
        assert _plain.same(ast.literal_eval(text), value), text
    class Int(int):
        pass
    for value, what in [(Int(3), "a <Int object>"), ([1, Int(3)], "a <Int object>"), (math.nan, "nan"),
                        (frozenset(), "frozenset"), ((x for x in ()), "generator"), (lambda: 0, "function"),
                        (10 ** 5000, "4300 digits")]:
        with pytest.raises(_plain.NotPlain, match=what):
            _plain.literal(value)
    nested: list[object] = []
    nested.append(nested)
    with pytest.raises(_plain.NotPlain, match="nested deeper"):
        _plain.literal(nested)
    assert not _plain.same(1, True) and not _plain.same(1, 1.0) and not _plain.same([1], (1,))


def test_the_grader_passes_only_the_records_that_satisfy_the_tests_own_code() -> None:
    assert judge(ADD, ["add"], f"[{_record('add', (2, 3), 'return', 5)}]") == ""
    assert judge(ADD, ["add"], f"[{_record('add', (2, 3), 'return', 6)}]") == "AssertionError"
    assert judge(ADD, ["add"], f"[{_record('add', (2, 3), 'return', 5.0)}]") == ""  # the test's == decides
    assert judge("assert add(2, 3) is True", ["add"], f"[{_record('add', (2, 3), 'return', 1)}]") == "AssertionError"
    raised = f"[{_record('add', (2, 3), 'raise', ('TypeError', 'no'))}]"
    assert judge(ADD, ["add"], raised) == "TypeError: no"
    caught = "try:\n    add(2, 3)\nexcept ValueError:\n    pass\nelse:\n    assert False"
    assert judge(caught, ["add"], f"[{_record('add', (2, 3), 'raise', ('ValueError', 'bad'))}]") == ""
    mine = f"[{_record('add', (2, 3), 'raise', ('MyError', 'bad'))}]"
    assert judge(caught, ["add"], mine) == "SolutionError: MyError: bad"


@pytest.mark.parametrize(("payload", "why"), [
    ("", "recorded no results"),
    ("[]", "recorded no result for this call"),
    ("[('add', (2, 3), {}, 'return', __import__('os'), None)]", "malformed results: not plain data"),
    ("[('add', (2, 3), {}, 'return', 5)]", "not a 6-tuple"),
    ("{'add': 5}", "not a list of records"),
    ("[" + "(" * 500 + ")" * 500 + "]", "not plain data"),
    (f"[{_record('sub', (2, 3), 'return', 5)}]", "recorded another call here (sub(...))"),
    (f"[{_record('add', (2, 4), 'return', 5)}]", "recorded another call here"),
    (f"[{_record('add', (2, 3), 'return', 5)}, {_record('add', (2, 3), 'return', 5)}]", "more calls than the test"),
    (f"[{_record('add', (2, 3), 'opaque', 'returned a <X object>')}]", "add(2, 3) returned a <X object>, which cannot"),
    (f"[{_record('add', (), 'limit', 'more than 1000 calls')}]", "add(2, 3): more than 1000 calls"),
    ("[" + ", ".join([_record("add", (2, 3), "return", 5)] * (MAX_CALLS + 2)) + "]", "more than 1000 calls"),
])
def test_records_that_are_missing_malformed_or_not_the_tests_calls_fail_it(payload: str, why: str) -> None:
    assert why in judge(ADD, ["add"], payload)


def test_a_test_that_catches_everything_still_fails_on_a_bad_record() -> None:
    swallowing = "try:\n    assert add(2, 3) == 5\nexcept BaseException:\n    pass"
    assert "recorded another call" in judge(swallowing, ["add"], f"[{_record('sub', (2, 3), 'return', 5)}]")


def test_imports_in_the_replay_are_copies_the_grader_keeps_its_modules() -> None:
    test = "import math; math.gcd = None; assert gcd(100, 75) == 25"
    assert judge(test, ["gcd"], f"[{_record('gcd', (100, 75), 'return', 25)}]") == ""
    assert math.gcd(4, 6) == 2


def test_arguments_the_solution_changed_are_changed_in_the_replay_too() -> None:
    test = "a, b = [0, 4], [1, 9]\nmerge(a, b)\nassert a == [0, 4] and b == [1, 9]"
    left = f"[{_record('merge', ([0, 4], [1, 9]), 'return', None, (([0, 1, 4, 9], [1, 9]), {}))}]"
    assert judge(test, ["merge"], left) == "AssertionError"
    assert judge(test, ["merge"], f"[{_record('merge', ([0, 4], [1, 9]), 'return', None)}]") == ""


def test_graded_in_the_sandbox_keywords_exceptions_and_imports_round_trip() -> None:
    solution = ("import math\n"
                "def root(x, *, exact=False):\n"
                "    if x < 0:\n        raise ValueError('negative')\n"
                "    return math.isqrt(x) if exact else math.sqrt(x)\n")
    tests = ["assert root(16, exact=True) == 4 and root(2.25) == 1.5",
             "try:\n    root(-1)\nexcept ValueError as exc:\n    assert str(exc) == 'negative'\n"
             "else:\n    assert False",
             "import math; math.isqrt = None; assert root(9, exact=True) == 3",
             "assert sorted(root(n, exact=True) for n in range(5)) == [0, 1, 1, 1, 2]"]
    outcomes = grade(default_sandbox(), solution, tests)
    assert [o.detail for o in outcomes] == ["", "", "TypeError: 'NoneType' object is not callable", ""]
    assert pass_rate(outcomes) == 0.75


def test_records_past_their_limits_stop_the_test_naming_the_limit() -> None:
    many = "for i in range(1005):\n    assert add(i, 0) == i"
    solution = "def add(a, b):\n    return a + b\n"
    big = "assert len(spread(60000)) == 60000"
    outcomes = grade(default_sandbox(), solution + "def spread(n):\n    return 'x' * n\n", [many, big])
    assert [o.detail for o in outcomes] == ["add(1000, 0): more than 1000 calls",
                                            "spread(60000): results over 49152 bytes in all"]


def test_the_harness_compiles_the_shared_code_itself_under_another_interpreters_bytecode() -> None:
    code = harness(ADD, ["add"], "solution.py")
    other = code.replace(repr(importlib.util.MAGIC_NUMBER), repr(b"nope"), 1)
    assert other != code
    verdict = grade_copy(default_sandbox(), other, files={"solution.py": "def add(a, b):\n    return a + b\n"},
                         payload=True)
    assert verdict.passed and judge(ADD, ["add"], verdict.payload) == ""
