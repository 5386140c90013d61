"""Built-in leaf rubrics: answer matching, formats, numbers, math, code tests, penalties.

Each reads the policy's answer from ``response`` (a field path, default ``"action"``: the whole
action when it is a string) and, where there is a reference answer, takes it literally from
``expected`` or from the step through ``target`` (e.g. ``"observation.metadata.answer"``).
A wrong or unparseable *answer* scores low; a broken *setup* (missing field, bad reference,
malformed test results) is a fault (``RubricError``, or the declared fallback).
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Mapping
from typing import Any

from openenv.errors import ConfigError
from openenv.rubric import Rubric, RubricError, RubricResult
from openenv_rubrics.fields import FieldPath, as_text

__all__ = [
    "CodeTestPassRate",
    "ExactMatch",
    "FormatPenalty",
    "LengthPenalty",
    "MathEquivalence",
    "NormalizedMatch",
    "NumericMatch",
    "RegexMatch",
    "normalize_text",
]


class _Answer(Rubric):
    """Shared plumbing: where the answer and the reference come from."""

    _abstract = True
    #: Whether a numeric ``expected`` literal is compared as its text (``4`` -> ``"4"``).
    _text_reference = False

    def __init__(self, *, response: str = "action", expected: Any = None, target: str | None = None,
                 needs_reference: bool = True, **base: Any) -> None:
        super().__init__(**base)
        self.response = FieldPath(response, owner=self.name)
        if needs_reference and (expected is None) == (target is None):
            raise ConfigError(f"rubric '{self.name}': give exactly one of expected=<literal answer> or "
                              "target=<field path to the answer, e.g. 'observation.metadata.answer'>.")
        self.expected = expected
        if self._text_reference and isinstance(expected, int | float) and not isinstance(expected, bool):
            self.expected = str(expected)  # `expected=4` on a command line reads as a number
        self.target = None if target is None else FieldPath(target, owner=self.name)

    def _response(self, action: Any, observation: Any) -> Any:
        return self.response.get(self.name, action, observation)

    def _reference(self, action: Any, observation: Any) -> Any:
        if self.target is None:
            return self.expected
        return self.target.get(self.name, action, observation)


class ExactMatch(_Answer):
    """1.0 when the answer equals the reference exactly (optionally ignoring case), else 0.0."""

    _text_reference = True

    def __init__(self, *, case_sensitive: bool = True, **kw: Any) -> None:
        super().__init__(**kw)
        self.case_sensitive = case_sensitive

    def evaluate(self, action: Any, observation: Any) -> float:
        got = as_text(self.name, self.response, self._response(action, observation))
        ref = self._reference(action, observation)
        if not isinstance(ref, str):
            raise RubricError(self.name, f"reference answer is {type(ref).__name__} {ref!r}, expected a string.")
        if not self.case_sensitive:
            got, ref = got.casefold(), ref.casefold()
        return 1.0 if got == ref else 0.0


_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_text(text: str, *, articles: bool = True) -> str:
    """Unicode NFKC, case-folded, punctuation removed, (English articles dropped), spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_PUNCT)
    if articles:
        text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


class NormalizedMatch(_Answer):
    """1.0 when answer and reference are equal after ``normalize_text``; else 0.0."""

    _text_reference = True

    def __init__(self, *, drop_articles: bool = True, **kw: Any) -> None:
        super().__init__(**kw)
        self.drop_articles = drop_articles

    def evaluate(self, action: Any, observation: Any) -> float:
        got = as_text(self.name, self.response, self._response(action, observation))
        ref = self._reference(action, observation)
        if not isinstance(ref, str):
            raise RubricError(self.name, f"reference answer is {type(ref).__name__} {ref!r}, expected a string.")
        same = normalize_text(got, articles=self.drop_articles) == normalize_text(ref, articles=self.drop_articles)
        return 1.0 if same else 0.0


def _compile(owner: str, pattern: str, flags: str) -> re.Pattern[str]:
    bits = 0
    for ch in flags:
        flag = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}.get(ch)
        if flag is None:
            raise ConfigError(f"rubric '{owner}': unknown regex flag {ch!r}; use any of 'imsx'.")
        bits |= flag
    try:
        return re.compile(pattern, bits)
    except re.error as exc:
        raise ConfigError(f"rubric '{owner}': invalid regular expression {pattern!r}: {exc}.") from None


class RegexMatch(_Answer):
    """1.0 when the answer matches ``pattern`` (``mode``: search / match / fullmatch), else 0.0."""

    def __init__(self, *, pattern: str, mode: str = "fullmatch", flags: str = "", **kw: Any) -> None:
        super().__init__(needs_reference=False, **kw)
        if mode not in ("search", "match", "fullmatch"):
            raise ConfigError(f"rubric '{self.name}': mode must be search, match or fullmatch, got {mode!r}.")
        self.pattern = _compile(self.name, pattern, flags)
        self._matcher = getattr(self.pattern, mode)

    def evaluate(self, action: Any, observation: Any) -> float:
        got = as_text(self.name, self.response, self._response(action, observation))
        return 1.0 if self._matcher(got) is not None else 0.0


_NUMBER = re.compile(r"[-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _to_number(text: str) -> float | None:
    try:
        value = float(text.replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class NumericMatch(_Answer):
    """1.0 when the answer is a number within tolerance of the reference, else 0.0.

    ``extract``: ``"strict"`` (the whole answer is one number, thousands separators allowed) or
    ``"last"`` (the last number in the text, for "... so the answer is 42"). Within tolerance
    means ``|got - ref| <= abs_tol`` or ``<= rel_tol * |ref|``.
    """

    def __init__(self, *, abs_tol: float = 1e-6, rel_tol: float = 0.0, extract: str = "strict", **kw: Any) -> None:
        super().__init__(**kw)
        if abs_tol < 0 or rel_tol < 0:
            raise ConfigError(f"rubric '{self.name}': abs_tol and rel_tol must be >= 0.")
        if extract not in ("strict", "last"):
            raise ConfigError(f"rubric '{self.name}': extract must be 'strict' or 'last', got {extract!r}.")
        self.abs_tol, self.rel_tol, self.extract = float(abs_tol), float(rel_tol), extract

    def _parse_answer(self, value: Any) -> float | None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value) if math.isfinite(value) else None
        text = as_text(self.name, self.response, value).strip()
        if self.extract == "strict":
            return _to_number(text)
        found = _NUMBER.findall(text)
        return _to_number(found[-1]) if found else None

    def evaluate(self, action: Any, observation: Any) -> float:
        ref_raw = self._reference(action, observation)
        ref = float(ref_raw) if isinstance(ref_raw, int | float) and not isinstance(ref_raw, bool) else (
            _to_number(ref_raw.strip()) if isinstance(ref_raw, str) else None)
        if ref is None or not math.isfinite(ref):
            raise RubricError(self.name, f"reference answer {ref_raw!r} is not a finite number.")
        got = self._parse_answer(self._response(action, observation))
        if got is None:
            return 0.0
        return 1.0 if abs(got - ref) <= max(self.abs_tol, self.rel_tol * abs(ref)) else 0.0


class MathEquivalence(_Answer):
    """1.0 when the answer is mathematically equivalent to the reference (``math-verify``), else 0.0.

    Both sides are parsed by ``math_verify.parse`` (LaTeX, ``\\boxed{}``, plain expressions) and
    compared by ``math_verify.verify``. A reference that cannot be parsed is a fault; an answer
    that cannot be parsed scores 0.0. ``timeout`` (seconds) bounds parsing and comparison in the
    main thread only: math-verify's timeouts use signals, so in other threads they are off (bound
    the answer's length with a gate there).
    """

    def __init__(self, *, float_rounding: int = 6, timeout: int = 5, **kw: Any) -> None:
        super().__init__(**kw)
        import math_verify  # import when built, not when listed

        self._mv = math_verify
        self.float_rounding = int(float_rounding)
        self.timeout = int(timeout)
        self._gold_cache: dict[str, Any] = {}

    def _timeout(self) -> int | None:
        import threading

        return self.timeout if threading.current_thread() is threading.main_thread() else None

    def _parse(self, text: str) -> Any:
        return self._mv.parse(text, parsing_timeout=self._timeout())  # type: ignore[arg-type]

    def evaluate(self, action: Any, observation: Any) -> float:
        ref = self._reference(action, observation)
        if isinstance(ref, int | float) and not isinstance(ref, bool):
            ref = repr(ref)
        if not isinstance(ref, str):
            raise RubricError(self.name, f"reference answer is {type(ref).__name__} {ref!r}, expected a string.")
        gold = self._gold_cache.get(ref)
        if gold is None:
            gold = self._parse(ref if "$" in ref or "\\" in ref else f"${ref}$")
            if all(isinstance(g, str) for g in gold):  # [] or only the raw-text fallback
                raise RubricError(self.name, f"math-verify could not parse the reference answer {ref!r}.")
            if len(self._gold_cache) < 4096:
                self._gold_cache[ref] = gold
        value = self._response(action, observation)
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = repr(value)
        answer = self._parse(as_text(self.name, self.response, value))
        if not answer:
            return 0.0
        ok = self._mv.verify(gold, answer, float_rounding=self.float_rounding,
                             timeout_seconds=self._timeout())
        return 1.0 if ok else 0.0


class CodeTestPassRate(Rubric):
    """The fraction of tests passed, read from ``results`` (default ``"observation.tests"``).

    The field holds ``{"passed": int, "total": int}`` (a mapping or an object with those
    attributes). ``total == 0`` is a fault unless ``empty_score`` says what no tests are worth.
    A missing or null field (a step that ran no tests, e.g. the coding env's steps before the
    submission) is a fault unless ``missing_score`` says what such a step is worth. With
    ``all_or_nothing`` the score is 1.0 only when every test passed.
    """

    def __init__(self, *, results: str = "observation.tests", all_or_nothing: bool = False,
                 empty_score: float | None = None, missing_score: float | None = None, **base: Any) -> None:
        super().__init__(**base)
        self.results = FieldPath(results, owner=self.name)
        self.all_or_nothing = all_or_nothing
        for option, value in (("empty_score", empty_score), ("missing_score", missing_score)):
            if value is not None and not self.low <= value <= self.high:
                raise ConfigError(f"rubric '{self.name}': {option}={value} is outside [{self.low}, {self.high}].")
        self.empty_score = empty_score
        self.missing_score = None if missing_score is None else float(missing_score)

    def _count(self, results: Any, key: str) -> int:
        value = results.get(key) if isinstance(results, Mapping) else getattr(results, key, None)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RubricError(self.name, f"test results field '{self.results.text}.{key}' is {value!r}, "
                                         "expected a non-negative integer.")
        return value

    def evaluate(self, action: Any, observation: Any) -> float | RubricResult:
        if self.missing_score is None:
            results = self.results.get(self.name, action, observation)
        else:
            results = self.results.get_or(None, action, observation)
            if results is None:
                return self.missing_score
        passed, total = self._count(results, "passed"), self._count(results, "total")
        if passed > total:
            raise RubricError(self.name, f"test results say passed={passed} > total={total}.")
        if total == 0:
            if self.empty_score is None:
                raise RubricError(self.name, "no tests were run (total=0); set empty_score to score that case.")
            return self.empty_score
        if self.all_or_nothing:
            return 1.0 if passed == total else 0.0
        return RubricResult(passed / total, {"passed": float(passed), "total": float(total)})


class LengthPenalty(_Answer):
    """0.0 up to ``max_length`` units of length, then linearly down to -1.0 at ``limit`` and beyond.

    ``unit``: ``"chars"`` or ``"words"``. Range ``[-1, 0]``: add it to a reward with a weighted sum.
    """

    low, high = -1.0, 0.0

    def __init__(self, *, max_length: int, limit: int, unit: str = "chars", **kw: Any) -> None:
        super().__init__(needs_reference=False, **kw)
        if not 0 <= max_length < limit:
            raise ConfigError(f"rubric '{self.name}': need 0 <= max_length < limit, got max_length={max_length}, "
                              f"limit={limit}.")
        if unit not in ("chars", "words"):
            raise ConfigError(f"rubric '{self.name}': unit must be 'chars' or 'words', got {unit!r}.")
        self.max_length, self.limit, self.unit = max_length, limit, unit

    def evaluate(self, action: Any, observation: Any) -> float | RubricResult:
        text = as_text(self.name, self.response, self._response(action, observation))
        length = len(text) if self.unit == "chars" else len(text.split())
        if length <= self.max_length:
            return RubricResult(0.0, {"length": float(length)})
        over = min(1.0, (length - self.max_length) / (self.limit - self.max_length))
        return RubricResult(-over, {"length": float(length)})


class FormatPenalty(_Answer):
    """0.0 when the answer matches the required format ``pattern`` (fullmatch), else ``penalty``."""

    low, high = -1.0, 0.0

    def __init__(self, *, pattern: str, penalty: float = -1.0, flags: str = "s", **kw: Any) -> None:
        super().__init__(needs_reference=False, **kw)
        if not penalty < 0:
            raise ConfigError(f"rubric '{self.name}': penalty must be negative, got {penalty}.")
        if penalty < self.low:
            self.low = float(penalty)
        self.penalty = float(penalty)
        self.pattern = _compile(self.name, pattern, flags)

    def evaluate(self, action: Any, observation: Any) -> float:
        text = as_text(self.name, self.response, self._response(action, observation))
        return 0.0 if self.pattern.fullmatch(text) else self.penalty
