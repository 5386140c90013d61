"""The rubric contract: reward functions with a declared range, components and a fault policy.

A rubric turns what happened into a reward. Two levels:

* **per step** — ``score(action, observation) -> RubricResult``; implement ``evaluate``;
* **per episode** (trajectory) — ``score_episode(steps) -> RubricResult``; implement
  ``evaluate_episode``. A per-step rubric asked for an episode score scores the **last** step
  (outcome reward); an episode-only rubric asked for a step score raises ``RubricError``.

Async rubrics (an LLM judge) subclass ``AsyncRubric`` and implement ``aevaluate`` /
``aevaluate_episode``; callers use ``await rubric.ascore(...)`` / ``ascore_episode``, which also
work on sync rubrics. ``rubric.is_async`` says which call a server must make.

Every result is checked against the declared range ``[low, high]`` (``NaN`` never passes). A value
outside it, a non-number, or an exception from ``evaluate`` becomes a ``RubricError`` naming the
rubric, unless the rubric was built with ``on_error="fallback"``: then the result is
``fallback_score`` (inside the range, required) with ``error`` set to what went wrong — a fault is
never a silent 0.

``RubricResult.components`` maps component names to scores: a leaf rubric reports none of its own
(its score *is* the result); a composite reports each child under the child's name and flattens a
child's own components with dotted names (``"answer.exact"``). ``rationales`` holds the
explanation kept for a component (an LLM judge's rationale), ``rationale`` the top-level one.

The per-step path is plain Python (no pydantic, no validation beyond one type and range check).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from openenv.errors import ConfigError, RuleViolation

__all__ = ["AsyncRubric", "OnError", "Rubric", "RubricError", "RubricResult", "Step", "check_input_fields",
           "components_of"]

OnError = Literal["raise", "fallback"]


class RubricError(RuntimeError):
    """A rubric could not produce a valid score; ``rubric`` names it, ``reason`` says why."""

    code = "RUBRIC_ERROR"

    def __init__(self, rubric: str, reason: str) -> None:
        self.rubric, self.reason = rubric, reason
        super().__init__(f"rubric '{rubric}': {reason}")


class RubricResult:
    """One score with its breakdown. Plain slotted object: cheap to build on every step."""

    __slots__ = ("components", "error", "rationale", "rationales", "score")

    def __init__(
        self,
        score: float,
        components: dict[str, float] | None = None,
        rationale: str | None = None,
        rationales: dict[str, str] | None = None,
        error: str | None = None,
    ) -> None:
        self.score = score
        self.components: dict[str, float] = {} if components is None else components
        self.rationale = rationale
        self.rationales: dict[str, str] = {} if rationales is None else rationales
        #: Set when the score is a declared fallback: what went wrong.
        self.error = error

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"score": self.score, "components": dict(self.components)}
        if self.rationale is not None:
            doc["rationale"] = self.rationale
        if self.rationales:
            doc["rationales"] = dict(self.rationales)
        if self.error is not None:
            doc["error"] = self.error
        return doc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RubricResult):
            return NotImplemented
        return self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        extra = f", components={self.components}" if self.components else ""
        return f"RubricResult(score={self.score!r}{extra})"


class Step:
    """One step of an episode, as given to ``score_episode``."""

    __slots__ = ("action", "observation", "reward")

    def __init__(self, action: Any, observation: Any, reward: float | None = None) -> None:
        self.action, self.observation, self.reward = action, observation, reward

    def __repr__(self) -> str:
        return f"Step(action={self.action!r}, observation={self.observation!r}, reward={self.reward!r})"


def _default_name(cls: type) -> str:
    """``ExactMatch`` -> ``exact_match``, ``LLMJudge`` -> ``llm_judge``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__).lower()


class Rubric:
    """Base of every rubric. Subclasses implement ``evaluate`` and/or ``evaluate_episode``.

    ``evaluate`` returns a float or a ``RubricResult``; the public ``score`` checks it.
    Constructor arguments (keyword-only, shared by every rubric):

    * ``name`` — the component name (default: the class's ``name`` or its snake_case name);
    * ``low``/``high`` — the declared range (default: the class's ``low``/``high``);
    * ``on_error`` — ``"raise"`` (default) or ``"fallback"``; ``fallback_score`` is then required.
    """

    #: Default component name; ``""`` means the snake_case class name.
    name: ClassVar[str] = ""
    #: Default declared range.
    low: float = 0.0
    high: float = 1.0
    #: True for rubrics that must be awaited (``ascore``); a composite sets it per instance.
    is_async: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_abstract", False):
            return
        step = _overrides(cls, "evaluate", "aevaluate")
        episode = _overrides(cls, "evaluate_episode", "aevaluate_episode")
        if not (step or episode):
            raise RuleViolation(
                f"Rubric subclass {cls.__qualname__} implements neither a per-step method "
                "(evaluate/aevaluate) nor a per-episode one (evaluate_episode/aevaluate_episode). "
                "Implement at least one, or set `_abstract = True` on an intermediate base class."
            )
        cls.per_step = step

    _abstract: ClassVar[bool] = True
    #: Whether the rubric scores single steps (False: episode-only); a composite sets it per instance.
    per_step: bool = True

    def __init__(
        self,
        *,
        name: str | None = None,
        low: float | None = None,
        high: float | None = None,
        on_error: OnError = "raise",
        fallback_score: float | None = None,
    ) -> None:
        self.name = name or type(self).name or _default_name(type(self))  # type: ignore[misc]
        lo = float(type(self).low if low is None else low)
        hi = float(type(self).high if high is None else high)
        if math.isnan(lo) or math.isnan(hi) or not lo < hi:
            raise ConfigError(f"rubric '{self.name}': the range needs low < high, got low={lo}, high={hi}.")
        self.low, self.high = lo, hi
        if on_error not in ("raise", "fallback"):
            raise ConfigError(f"rubric '{self.name}': on_error must be 'raise' or 'fallback', got {on_error!r}.")
        if on_error == "fallback":
            if fallback_score is None:
                raise ConfigError(f"rubric '{self.name}': on_error='fallback' needs a fallback_score "
                                  f"inside [{lo}, {hi}].")
            if not lo <= float(fallback_score) <= hi:
                raise ConfigError(f"rubric '{self.name}': fallback_score={fallback_score} is outside "
                                  f"its range [{lo}, {hi}].")
        elif fallback_score is not None:
            raise ConfigError(f"rubric '{self.name}': fallback_score is only used with on_error='fallback'.")
        self.on_error: OnError = on_error
        self.fallback_score = None if fallback_score is None else float(fallback_score)

    # -- to implement ---------------------------------------------------------------------------

    def evaluate(self, action: Any, observation: Any) -> float | RubricResult:
        """The score for ``observation`` produced by ``action`` (per-step rubrics)."""
        raise RuleViolation(f"rubric '{self.name}' scores whole episodes only: call score_episode(steps).")

    def evaluate_episode(self, steps: Sequence[Step]) -> float | RubricResult:
        """The score of a whole episode; by default the last step's ``score``."""
        if not steps:
            raise RubricError(self.name, "cannot score an empty episode.")
        last = steps[-1]
        return self.score(last.action, last.observation)

    def reset(self) -> None:
        """Forget per-episode state; called when an episode starts."""

    def input_fields(self) -> tuple[str, ...]:
        """The dotted paths into the step this rubric reads (``"action.message"``,
        ``"observation.answer"``), so a server can refuse a misspelt one at start-up instead of failing
        every step. By default: every attribute that is a field path (an object with
        ``is_field_path = True`` and its ``text``, as ``openenv_rubrics.fields.FieldPath``), and the
        fields of the rubric's ``children``."""
        found: list[str] = []
        for value in vars(self).values():
            if getattr(value, "is_field_path", False) and isinstance(getattr(value, "text", None), str):
                found.append(value.text)
        for child in getattr(self, "children", None) or ():
            if isinstance(child, Rubric):
                found.extend(child.input_fields())
        return tuple(dict.fromkeys(found))

    def keeps_episode_state(self) -> bool:
        """Whether this rubric keeps per-episode state (what ``reset`` clears). By default: whether
        its class overrides ``reset``; a composite asks its children. A server gives each session
        its own copy of a rubric that does (``for_session``) and shares one that does not."""
        return type(self).reset is not Rubric.reset

    def for_session(self) -> Rubric:
        """The rubric one session of a server scores with: ``self`` when it keeps no per-episode
        state, else a deep copy, so one session's ``reset`` never clears another's episode.
        Override to share what must stay shared (a client, a cache); a composite copies itself and
        asks each child (a stateless child, e.g. an LLM judge, stays shared)."""
        return copy.deepcopy(self) if self.keeps_episode_state() else self

    # -- public calls ---------------------------------------------------------------------------

    def score(self, action: Any, observation: Any) -> RubricResult:
        """Score one step; the result is range-checked (or replaced by the declared fallback)."""
        try:
            value = self.evaluate(action, observation)
        except Exception as exc:
            return self._fault(exc)
        if type(value) is float and self.low <= value <= self.high:  # the hot path
            return RubricResult(value)
        return self._check(value)

    def score_episode(self, steps: Sequence[Step]) -> RubricResult:
        """Score a whole episode (a sequence of ``Step``)."""
        try:
            value = self.evaluate_episode(steps)
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    async def ascore(self, action: Any, observation: Any) -> RubricResult:
        """Async twin of ``score``; works for sync and async rubrics."""
        return self.score(action, observation)

    async def ascore_episode(self, steps: Sequence[Step]) -> RubricResult:
        """Async twin of ``score_episode``."""
        return self.score_episode(steps)

    # -- checks ---------------------------------------------------------------------------------

    def _check(self, value: Any) -> RubricResult:
        """Turn ``evaluate``'s answer into a checked result (or the fallback, or a RubricError)."""
        if isinstance(value, RubricResult):
            result = value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            result = RubricResult(float(value))
        else:
            return self._fault(RubricError(self.name, f"returned {type(value).__name__} {value!r}, "
                                                      "expected a float or a RubricResult."))
        score = result.score
        if not isinstance(score, int | float) or isinstance(score, bool):
            return self._fault(RubricError(self.name, f"returned a non-numeric score {score!r}."))
        if not self.low <= score <= self.high:
            return self._fault(RubricError(
                self.name, f"score {score!r} is outside its declared range [{self.low}, {self.high}]."))
        if type(score) is not float:
            result.score = float(score)
        return result

    def _fault(self, exc: BaseException) -> RubricResult:
        """Apply the fault policy to ``exc``: raise a RubricError naming this rubric, or fall back."""
        if isinstance(exc, RuleViolation):  # a programming error, never hidden by a fallback
            raise exc
        if isinstance(exc, RubricError):
            err = exc
        else:
            err = RubricError(self.name, f"raised {type(exc).__name__}: {exc}")
            err.__cause__ = exc
        if self.on_error == "fallback" and self.fallback_score is not None:
            return RubricResult(self.fallback_score, error=str(err))
        raise err

    def describe(self) -> dict[str, Any]:
        """What this rubric is: name, class, range, fault policy (for listings and logs)."""
        doc: dict[str, Any] = {"name": self.name, "class": type(self).__qualname__,
                               "low": self.low, "high": self.high, "async": self.is_async,
                               "per_step": self.per_step, "on_error": self.on_error}
        if self.fallback_score is not None:
            doc["fallback_score"] = self.fallback_score
        return doc

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, low={self.low}, high={self.high})"


class AsyncRubric(Rubric):
    """Base of rubrics that must be awaited: implement ``aevaluate`` and/or ``aevaluate_episode``.

    ``timeout`` (seconds, optional) bounds each call; running past it is a fault like any other.
    """

    _abstract = True
    is_async = True

    def __init__(self, *, timeout: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if timeout is not None and not timeout > 0:
            raise ConfigError(f"rubric '{self.name}': timeout must be > 0 seconds, got {timeout}.")
        self.timeout = timeout

    async def aevaluate(self, action: Any, observation: Any) -> float | RubricResult:
        raise RuleViolation(f"rubric '{self.name}' scores whole episodes only: call ascore_episode(steps).")

    async def aevaluate_episode(self, steps: Sequence[Step]) -> float | RubricResult:
        if not steps:
            raise RubricError(self.name, "cannot score an empty episode.")
        last = steps[-1]
        return await self.ascore(last.action, last.observation)

    def score(self, action: Any, observation: Any) -> RubricResult:
        raise _needs_await(self)

    def score_episode(self, steps: Sequence[Step]) -> RubricResult:
        raise _needs_await(self)

    async def ascore(self, action: Any, observation: Any) -> RubricResult:
        try:
            value = await self._bounded(self.aevaluate(action, observation))
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    async def ascore_episode(self, steps: Sequence[Step]) -> RubricResult:
        try:
            value = await self._bounded(self.aevaluate_episode(steps))
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    async def _bounded(self, coro: Any) -> Any:
        if self.timeout is None:
            return await coro
        import asyncio

        try:
            return await asyncio.wait_for(coro, self.timeout)
        except TimeoutError:
            raise RubricError(self.name, f"timed out after {self.timeout} s.") from None

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        if self.timeout is not None:
            doc["timeout"] = self.timeout
        return doc


def _needs_await(rubric: Rubric) -> RuleViolation:
    return RuleViolation(f"rubric '{rubric.name}' is async: call `await rubric.ascore(...)` / "
                         "`ascore_episode(...)` instead of score().")


def _overrides(cls: type, *methods: str) -> bool:
    """Whether ``cls`` (or a concrete base) defines one of ``methods`` beyond the contract's defaults."""
    defaults = {getattr(base, m, None) for base in (Rubric, AsyncRubric) for m in methods}
    return any(getattr(cls, m, None) not in defaults for m in methods)


def components_of(children: Mapping[str, RubricResult]) -> tuple[dict[str, float], dict[str, str]]:
    """Flatten children's results into (components, rationales) with dotted names (for composites)."""
    components: dict[str, float] = {}
    rationales: dict[str, str] = {}
    for name, res in children.items():
        components[name] = res.score
        if res.components:
            for key, value in res.components.items():
                components[f"{name}.{key}"] = value
        if res.rationale is not None:
            rationales[name] = res.rationale
        elif res.error is not None:
            rationales[name] = f"fallback: {res.error}"
        if res.rationales:
            for key, text in res.rationales.items():
                rationales[f"{name}.{key}"] = text
    return components, rationales



def check_input_fields(rubric: Rubric, action_type: Any, observation_type: Any) -> None:
    """Refuse (``ConfigError``, with did-you-mean) a field path of ``rubric`` that names no field of
    the env's action or observation model. Only what the models declare is checked: a path stops
    being checked where it enters a free-form value (``metadata``, a dict, ``Any``), a model that
    accepts extra fields, has subclasses or validates into other classes (a tool env's
    ``ToolAction``), or the base
    ``Action``/``Observation`` of an env that declares none."""
    from pydantic import BaseModel

    from openenv.errors import did_you_mean
    from openenv.types import Action, Observation

    roots = {"action": (action_type, Action), "observation": (observation_type, Observation)}
    for path in rubric.input_fields():
        root, *parts = path.split(".")
        model, base = roots.get(root, (None, None))
        if model is None or model is base:
            continue
        walked = [root]
        current: Any = model
        for part in parts:
            if not (isinstance(current, type) and issubclass(current, BaseModel)):
                break  # free-form from here on (a dict, Any): nothing declared to check against
            own = getattr(BaseModel.model_validate, "__func__", None)
            dispatches = getattr(current.model_validate, "__func__", None) is not own
            if current.model_config.get("extra") == "allow" or current.__subclasses__() or dispatches:
                break  # open to extra keys, or a base that validates into other classes (tool actions)
            fields = current.model_fields
            if part not in fields:
                raise ConfigError(
                    f"rubric '{rubric.name}': field path '{path}' names no field '{part}' of "
                    f"{'.'.join(walked)} ({current.__name__}: {', '.join(fields) or 'no fields'})."
                    f"{did_you_mean(part, list(fields))} Fix the rubric's configuration.")
            walked.append(part)
            annotation = fields[part].annotation
            current = annotation if isinstance(annotation, type) else None
