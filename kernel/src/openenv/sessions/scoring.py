"""The server applies the env's rubric: each step's reward is the rubric's score.

``Scorer`` wraps one ``openenv.rubric.Rubric`` for a ``SessionManager``. After the env returns an
observation, the scorer returns the step's ``openenv.types.StepOutcome``: the rubric's score as
its reward, and the components for the wire (``reward_components`` and, when there are rationales
or a fallback error, ``reward_details`` next to ``observation``/``reward``/``done``). The env's
observation itself is left as the env built it.

Where the rubric runs:

* a **sync per-step** rubric runs inline, right after the env (a trivial one costs about a
  microsecond; ``python -m bench.rubrics --quick``), on the event loop and with **no timeout**:
  one that hangs stalls every session (the loop watchdog logs it), so a slow one must be heavy;
* a sync rubric marked **heavy** (``rubric.heavy = True``) runs on a worker thread, and an
  **async** rubric (an LLM judge) is awaited; both are bounded by ``timeout_s``;
* an **episode-only** (trajectory) rubric sees every step of the episode and scores at ``done``;
  steps before it carry reward ``0.0`` and no components.

Each session scores with ``session.rubric`` (``Scorer.for_session``): the server's one instance
when the rubric keeps no per-episode state, else the session's own copy (``Rubric.for_session``),
so one session's reset never clears another's episode. Either way the step path reads one
attribute and allocates nothing more.

Faults (the rubric raises, times out, or leaves its declared range) become ``RubricFailure``
(``RUBRIC_ERROR``, naming the rubric) and the session survives — unless the rubric was built with
``on_error="fallback"``: then the reply carries the fallback score and the error under
``reward_details["error"]``. A fault is never a silent reward.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError, RubricFailure, RuleViolation, ValidationError
from openenv.rubric import Rubric, RubricError, RubricResult, Step, components_of
from openenv.types import Observation, StepOutcome

if TYPE_CHECKING:
    from openenv.sessions.session import Session

__all__ = ["DEFAULT_RUBRIC_TIMEOUT_S", "Scorer", "declared_rubric", "refuse_client_reward", "server_rubric"]

#: Seconds an async or heavy rubric may take per step when the server sets no step timeout.
DEFAULT_RUBRIC_TIMEOUT_S = 60.0


def declared_rubric(env_class: type | None) -> Rubric | None:
    """The rubric an env class declares: a class attribute ``rubric`` holding a ``Rubric``, or a
    ``rubric()`` staticmethod/classmethod returning one. ``None`` when it declares none (an upstream
    env's ``rubric = None`` default, or an instance attribute set in ``__init__``, is not a
    declaration, nor is any other object there, e.g. an upstream-style rubric the env calls itself:
    such an env computes its own reward)."""
    if env_class is None:
        return None
    value = getattr(env_class, "rubric", None)
    if value is None or isinstance(value, Rubric):
        return value
    if not (inspect.isfunction(value) or inspect.ismethod(value)):
        # Something else (an upstream rubric object the env applies itself): not a declaration.
        return None
    try:
        built = value()
    except TypeError as exc:
        raise RuleViolation(
            f"{env_class.__qualname__}.rubric() could not be called without arguments ({exc}): make it "
            "a @staticmethod or @classmethod that returns an openenv.rubric.Rubric.") from None
    if built is not None and not isinstance(built, Rubric):
        raise RuleViolation(f"{env_class.__qualname__}.rubric() returned a {type(built).__name__}, "
                            "not an openenv.rubric.Rubric.")
    return built


class Scorer:
    """Applies one rubric to the observations of a session manager's steps."""

    __slots__ = ("_fast", "heavy", "inline", "name", "per_session", "rubric", "timeout_s")

    def __init__(self, rubric: Rubric, *, timeout_s: float | None = None) -> None:
        if not isinstance(rubric, Rubric):
            raise ConfigError(f"the server's rubric must be an openenv.rubric.Rubric, got {type(rubric).__name__}.")
        self.rubric = rubric
        self.name = rubric.name
        self.heavy = bool(getattr(rubric, "heavy", False))
        #: Scored right after the env on the same call (no await, no thread).
        self.inline = rubric.per_step and not rubric.is_async and not self.heavy
        self.timeout_s = DEFAULT_RUBRIC_TIMEOUT_S if timeout_s is None else timeout_s
        #: ``score`` is the contract's own: the inline path may take its float shortcut.
        self._fast = self.inline and type(rubric).score is Rubric.score
        #: The rubric keeps per-episode state: each session gets its own copy.
        self.per_session = rubric.keeps_episode_state()
        if self.per_session:
            self.for_session()  # a rubric that cannot be copied fails when the server starts

    def for_session(self) -> Rubric:
        """The rubric a new session scores with (``session.rubric``): the shared one, or a copy."""
        if not self.per_session:
            return self.rubric
        try:
            copy = self.rubric.for_session()
        except Exception as exc:
            raise ConfigError(
                f"rubric '{self.name}' keeps per-episode state (it overrides reset()), so each session "
                f"needs its own copy, but copying it failed ({type(exc).__name__}: {exc}). Override "
                "for_session() to build a session's copy and share what cannot be copied.") from None
        if type(copy) is not type(self.rubric):
            raise ConfigError(f"rubric '{self.name}'.for_session() returned a {type(copy).__name__}, "
                              f"not a {type(self.rubric).__name__}.")
        return copy

    # -- the step path ------------------------------------------------------------------------------

    def score_inline(self, session: Session, action: Any, obs: Observation) -> StepOutcome:
        """Score ``obs`` with ``session.rubric`` (sync, per step: ``self.inline``).

        The hot path (a rubric that returns an in-range float, ``score`` not overridden) does what
        ``Rubric.score`` does without building a ``RubricResult``."""
        rubric = session.rubric
        try:
            if self._fast:
                try:
                    value = rubric.evaluate(action, obs)
                except Exception as exc:
                    result = rubric._fault(exc)
                else:
                    if type(value) is float and rubric.low <= value <= rubric.high:
                        return StepOutcome(obs, value, {self.name: value})
                    result = rubric._check(value)
            else:
                result = rubric.score(action, obs)
        except RubricError as exc:
            raise self.failure(exc) from None
        except RuleViolation as exc:  # a rubric that cannot score this env at all
            raise self.failure(RubricError(self.name, str(exc))) from None
        return self._outcome(obs, result)

    async def score(self, session: Session, action: Any, obs: Observation) -> StepOutcome:
        """Score ``obs`` with ``session.rubric`` (any kind); an episode-only rubric's steps so far
        are ``session.rubric_steps``."""
        rubric: Rubric = session.rubric
        if not rubric.per_step:
            episode = session.rubric_steps
            assert episode is not None
            episode.append(Step(action, obs, obs.reward))
            if not obs.done:
                return StepOutcome(obs, 0.0, {})
            steps = list(episode)
            episode.clear()
            result = await self._bounded(rubric, rubric.ascore_episode(steps) if rubric.is_async
                                         else asyncio.to_thread(rubric.score_episode, steps))
        elif self.inline:
            return self.score_inline(session, action, obs)
        elif rubric.is_async:
            result = await self._bounded(rubric, rubric.ascore(action, obs))
        else:
            result = await self._bounded(rubric, asyncio.to_thread(rubric.score, action, obs))
        return self._outcome(obs, result)

    def on_reset(self, session: Session, obs: Observation) -> StepOutcome:
        """A new episode of ``session``: its rubric forgets the old one; the reset reply carries
        the env's reward and empty components."""
        if session.rubric_steps is not None:
            session.rubric_steps.clear()
        session.rubric.reset()
        return StepOutcome(obs, obs.reward, {})

    # -- helpers ------------------------------------------------------------------------------------

    async def _bounded(self, rubric: Rubric, work: Any) -> RubricResult:
        try:
            result: RubricResult = await asyncio.wait_for(work, self.timeout_s)
            return result
        except TimeoutError:
            try:
                return rubric._fault(RubricError(self.name, f"timed out after {self.timeout_s} s on the server."))
            except RubricError as exc:
                raise self.failure(exc) from None
        except RubricError as exc:
            raise self.failure(exc) from None
        except RuleViolation as exc:
            raise self.failure(RubricError(self.name, str(exc))) from None

    def _outcome(self, obs: Observation, result: RubricResult) -> StepOutcome:
        components, rationales = components_of({self.name: result})
        details: dict[str, Any] | None = None
        if rationales or result.error is not None:
            details = {}
            if rationales:
                details["rationales"] = rationales
            if result.error is not None:
                details["error"] = result.error
        return StepOutcome(obs, result.score, components, details)

    def failure(self, exc: RubricError) -> RubricFailure:
        """The wire error for a rubric fault: names the rubric, says why, and that the session lives."""
        reason = exc.reason if exc.reason.endswith((".", "!", "?")) else exc.reason + "."
        return RubricFailure(
            f"rubric '{exc.rubric}' could not score this step: {reason} The env's step ran and the "
            "session is still usable; fix the rubric or its config, or declare on_error='fallback' "
            "with a fallback_score.",
            data={"rubric": exc.rubric, "reason": exc.reason})

    def describe(self) -> dict[str, Any]:
        doc = self.rubric.describe()
        doc["heavy"] = self.heavy
        return doc


def refuse_client_reward(kwargs: dict[str, Any], loc: Any) -> None:
    """A client can never set a reward: a step argument named ``reward`` is refused (the server's
    rubric sets the reward). An action field named ``reward`` is refused by the action model itself
    (actions forbid unknown fields), and the reward of the reply is the rubric's in any case."""
    if "reward" in kwargs:
        raise ValidationError("Invalid message: a client cannot set the reward; the server's rubric scores "
                              "each step. Drop 'reward' from the step arguments.", data={"errors": [{
                                  "type": "reward_forbidden", "loc": [*loc, "reward"],
                                  "msg": "The reward comes only from the server's rubric",
                                  "input": kwargs["reward"]}]})


def server_rubric(spec: Any, env_class: type | None, catalog: Any) -> Rubric | None:
    """The rubric a server applies: ``spec`` (``ServerConfig.rubric``: a ``NAME[=CONFIG]`` string
    resolved through the rubric registry, or a ``Rubric``) if given, else the env class's declaration
    (``declared_rubric``), else None. Unknown names raise ``UnknownNameError`` with a suggestion."""
    if spec is None:
        return declared_rubric(env_class)
    if isinstance(spec, Rubric):
        return spec
    if isinstance(spec, str):
        from openenv.rubric_spec import rubric_from_spec

        return rubric_from_spec(spec, catalog=catalog)
    raise ConfigError(f"rubric={spec!r}: give a 'NAME[=CONFIG]' string or an openenv.rubric.Rubric.")
