"""``EnvContract``: the promises every environment keeps, checked in-process and over a server.

::

    from openenv.testing import EnvContract

    def test_my_env_keeps_the_contract() -> None:
        EnvContract(MyEnv, valid_actions=[{"move": "up"}]).run()

Checks (each a method, so a test may run them one by one):

* ``check_reset`` – ``reset()`` returns an ``Observation`` with a bool
  ``done`` and a finite (or absent) reward; ``state`` right after it is a ``State`` with
  ``step_count == 0``.
* ``check_seeding`` – two fresh instances reset with the same seed give the same first observation.
* ``check_step`` – every valid action steps to an ``Observation``; ``step_count`` never goes down.
* ``check_invalid_action`` – the env's action type refuses an invalid action with a validation
  error (an action type that accepts anything would make every typo a silent no-op).
* ``check_close`` – ``close()`` runs without raising.
* ``check_concurrent_sessions`` (only when the env declares ``SUPPORTS_CONCURRENT_SESSIONS``) –
  two instances stepped differently keep their own state.
* ``check_served`` (when a transport with a client connector is installed in the plugin manager,
  ``ws`` preferred) – the env served by a real server on 127.0.0.1: reset, a valid step, an
  invalid step refused with ``openenv.errors.ValidationError`` while the session survives, the
  server calls ``close`` on the env when the session ends, and (for concurrent envs) two client
  sessions are independent.

Without ``valid_actions`` the contract steps with the first of the ``legal_actions`` the env lists
after a seeded ``reset`` (when its observation has that field), else builds one action from the
action type's JSON Schema
(first enum value, shortest allowed string, minimum number...), and fails naming
``valid_actions=`` when it cannot. Failures raise ``ContractError`` naming the env and the check.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from openenv.env import env_class_of, env_traits
from openenv.errors import ValidationError
from openenv.manifest import without_fields
from openenv.testing.errors import ContractError, expect
from openenv.types import Action, Observation, State

if TYPE_CHECKING:
    from openenv.plugins import PluginManager

__all__ = ["EnvContract", "invalid_action_for", "sample_action", "without_fields"]

_UNKNOWN_FIELD = "__openenv_contract_unknown_field__"


# -- actions from a schema ------------------------------------------------------------------------


def _sample(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    if depth > 8:
        raise ValueError("the schema nests too deeply")
    if "$ref" in schema:
        return _sample(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return _sample(options[0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "string":
        return "a" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = low + (1 if "exclusiveMinimum" in schema else 0)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return False
    if kind == "array":
        item = schema.get("items", {})
        return [_sample(item, defs, depth + 1) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "object" or "properties" in schema:
        required = schema.get("required", [])
        props = schema.get("properties", {})
        # Required fields, plus constant ones (a discriminator such as ``type`` with a default).
        names = [n for n, p in props.items() if n in required or "const" in p]
        return {name: _sample(props.get(name, {}), defs, depth + 1) for name in names}
    if not schema:
        return "a"
    raise ValueError(f"no sample for schema {schema!r}")


def sample_action(action_type: type[BaseModel]) -> dict[str, Any]:
    """The simplest action object ``action_type``'s JSON Schema allows (required fields only).

    Raises ``ContractError`` (naming ``valid_actions=``) when the result does not validate.
    """
    try:
        schema = action_type.model_json_schema()
        defs = schema.get("$defs", {})
        members = schema.get("oneOf") or schema.get("anyOf")
        if members:  # a union of action types: the first member
            schema = members[0]
        value = _sample(schema, defs)
        action_type.model_validate(value)
    except (ValueError, KeyError, TypeError, PydanticValidationError, ValidationError) as exc:
        raise ContractError(
            f"could not build a valid {action_type.__name__} from its JSON Schema ({exc}). Pass "
            "EnvContract(..., valid_actions=[{...}]) with actions your env accepts."
        ) from None
    if not isinstance(value, dict):
        raise ContractError(f"the schema of {action_type.__name__} is not an object; pass valid_actions=")
    return value


def _refused(action_type: type[BaseModel], value: Any) -> bool:
    try:
        action_type.model_validate(value)
    except (PydanticValidationError, ValidationError):
        return True
    return False


def invalid_action_for(action_type: type[BaseModel], valid: dict[str, Any]) -> dict[str, Any] | None:
    """An action object ``action_type`` refuses (derived from ``valid``), or ``None`` if it
    accepts every candidate (an unknown field, a missing required field, a wrong-typed field)."""
    candidates: list[dict[str, Any]] = [{**valid, _UNKNOWN_FIELD: 1}, {}]
    for name in valid:
        candidates.append({**valid, name: {"not": ["a", "valid", "value"]}})
    for candidate in candidates:
        if _refused(action_type, candidate):
            return candidate
    return None


# -- the contract ---------------------------------------------------------------------------------


def _dump(obj: Any) -> Any:
    return obj.model_dump() if isinstance(obj, BaseModel) else obj


def _action(action_type: type[BaseModel], value: Any) -> Any:
    return action_type.model_validate(value) if isinstance(value, dict) else value


@dataclass
class EnvContract:
    """The env contract, bound to one env class (or factory)."""

    env: Any
    #: Action objects (dicts or ``Action`` instances) the env accepts after ``reset``.
    valid_actions: Sequence[Any] | None = None
    #: An action object the env's action type must refuse (default: derived from a valid one).
    invalid_action: dict[str, Any] | None = None
    seed: int = 1
    #: Observation fields that legitimately differ between two resets of the same seed (a
    #: per-session path, a timing): ``check_seeding`` ignores them at any depth. The manifest's
    #: ``volatile_fields`` says the same to ``openenv validate``.
    volatile_fields: Sequence[str] = ()
    #: Used for ``check_served`` (default: the process-wide manager, i.e. installed plugins).
    plugin_manager: PluginManager | None = None
    #: Run ``check_served`` when a client transport is available (``False`` to skip it).
    served: bool = True
    name: str = ""
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._legal: list[Any] | None = None
        cls = env_class_of(self.env)
        self.env_class: type | None = cls
        self.action_type: type[BaseModel] = getattr(cls, "action_type", None) or Action
        self.observation_type: type[BaseModel] = getattr(cls, "observation_type", None) or Observation
        traits = env_traits(self.env)
        self.concurrent = bool(traits["SUPPORTS_CONCURRENT_SESSIONS"])
        self.snapshots = bool(traits["SUPPORTS_SNAPSHOT"])
        self.name = self.name or getattr(self.env, "__name__", None) or type(self.env).__name__

    # -- runner -----------------------------------------------------------------------------------

    def run(self) -> list[str]:
        """Run every check that applies; returns the names of those that ran."""
        checks: list[tuple[str, Callable[[], None], bool]] = [
            ("check_reset", self.check_reset, True),
            ("check_seeding", self.check_seeding, True),
            ("check_step", self.check_step, True),
            ("check_invalid_action", self.check_invalid_action, True),
            ("check_close", self.check_close, True),
            ("check_concurrent_sessions", self.check_concurrent_sessions, self.concurrent),
            ("check_snapshot", self.check_snapshot, self.snapshots),
            ("check_served", self.check_served, self.served),
        ]
        for name, fn, applies in checks:
            if not applies:
                self.skipped.append(name)
                continue
            try:
                fn()
            except ContractError as exc:
                raise ContractError(f"[env {self.name}] {name}: {exc}") from exc
            except Exception as exc:
                raise ContractError(f"[env {self.name}] {name}: raised {type(exc).__name__}: {exc}") from exc
            if name not in self.skipped:
                self.ran.append(name)
        return list(self.ran)

    def actions(self) -> list[Any]:
        """The valid actions the checks use: ``valid_actions``, else the ``legal_actions`` the env
        lists after ``reset(seed=...)`` (the first one), else one built from the JSON Schema."""
        if self.valid_actions:
            return list(self.valid_actions)
        if self._legal is None:
            self._legal = self._legal_after_reset()
        if self._legal:
            return self._legal[:1]
        return [sample_action(self.action_type)]

    def _legal_after_reset(self) -> list[Any]:
        env = self._new()
        try:
            obs = asyncio.run(env.reset_async(seed=self.seed))
        finally:
            env.close()
        return self._legal_of(obs)

    def _legal_of(self, obs: Any) -> list[Any]:
        """The ``legal_actions`` an observation lists, as action objects (empty if it lists none)."""
        legal = getattr(obs, "legal_actions", None)
        if not isinstance(legal, list):
            return []
        schema = self.action_type.model_json_schema()
        fields = [n for n in (schema.get("required") or list(schema.get("properties", {}))) if n != "metadata"]
        # A bare legal action ("e2e4", 3) maps onto the action's only field, as `openenv run` does.
        single = fields[0] if len(fields) == 1 else None
        return [a if isinstance(a, dict) else {single: a} for a in legal
                if isinstance(a, dict) or single is not None]

    def _invalid(self) -> dict[str, Any]:
        if self.invalid_action is not None:
            return self.invalid_action
        first = self.actions()[0]
        found = invalid_action_for(self.action_type, first if isinstance(first, dict) else _dump(first))
        if found is None:
            raise ContractError(
                f"the action type {self.action_type.__name__} accepts every invalid action tried (an "
                "unknown field, a missing field, a wrong-typed field): give it typed fields and "
                "`extra='forbid'` (the base Action's setting), or pass invalid_action=")
        return found

    # -- in-process checks ------------------------------------------------------------------------

    def _new(self) -> Any:
        return self.env()

    def check_reset(self) -> None:
        env = self._new()
        try:
            obs = asyncio.run(env.reset_async(seed=self.seed))
            self._expect_observation(obs, "reset()", Observation)
            state = env.state
            expect(isinstance(state, State), f"state is not a State: {state!r}")
            expect(state.step_count == 0, f"state.step_count after reset() is {state.step_count}, not 0")
        finally:
            env.close()

    def check_seeding(self) -> None:
        first, second = self._new(), self._new()
        try:
            a = without_fields(_dump(asyncio.run(first.reset_async(seed=self.seed))), set(self.volatile_fields))
            b = without_fields(_dump(asyncio.run(second.reset_async(seed=self.seed))), set(self.volatile_fields))
        finally:
            first.close()
            second.close()
        expect(a == b, f"reset(seed={self.seed}) gave different first observations: {a!r} != {b!r}")

    def check_step(self) -> None:
        env = self._new()
        try:
            asyncio.run(env.reset_async(seed=self.seed))
            count = env.state.step_count
            for value in self.actions():
                obs = asyncio.run(env.step_async(_action(self.action_type, value)))
                self._expect_observation(obs, f"step({value!r})", Observation)
                state = env.state
                expect(isinstance(state, State), f"state after a step is not a State: {state!r}")
                expect(state.step_count >= count,
                       f"state.step_count went down from {count} to {state.step_count} after a step")
                count = state.step_count
                if obs.done:
                    break
        finally:
            env.close()

    def check_invalid_action(self) -> None:
        bad = self._invalid()
        expect(_refused(self.action_type, bad),
               f"{self.action_type.__name__} accepted the invalid action {bad!r}")

    def check_close(self) -> None:
        env = self._new()
        asyncio.run(env.reset_async(seed=self.seed))
        env.close()

    def check_snapshot(self) -> None:
        """``SUPPORTS_SNAPSHOT``: a snapshot taken after a step, restored on a fresh instance, gives
        that point's observation and state, and the next steps (the same actions on both) give the
        same observations as the original instance."""
        a, b = self._new(), self._new()
        ignore = set(self.volatile_fields)
        try:
            obs = asyncio.run(a.reset_async(seed=self.seed))
            obs = asyncio.run(a.step_async(_action(self.action_type, (self._legal_of(obs) or self.actions())[0])))
            if obs.done:  # a one-step episode: snapshot right after reset instead
                obs = asyncio.run(a.reset_async(seed=self.seed))
            snap = a.snapshot()
            expect(isinstance(snap, dict), f"snapshot() returned {type(snap).__name__}, expected a dict")
            try:
                snap = json.loads(json.dumps(snap, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ContractError(f"snapshot() returned data JSON cannot carry: {exc}") from None
            state_at = without_fields(_dump(a.state), ignore)
            restored = b.restore(snap)
            self._expect_observation(restored, "restore()", Observation)
            # The reward a restore reports is the env's choice; everything else must match.
            got, want = (without_fields(_dump(o), ignore | {"reward"}) for o in (restored, obs))
            expect(got == want, f"restore() gave another observation than the snapshot's point: {got!r} != {want!r}")
            got_state = without_fields(_dump(b.state), ignore)
            expect(got_state == state_at, f"state after restore() differs: {got_state!r} != {state_at!r}")
            for index in range(5):
                if obs.done:
                    break
                value = (self._legal_of(obs) or self.actions())[0]
                obs = asyncio.run(a.step_async(_action(self.action_type, value)))
                other = asyncio.run(b.step_async(_action(self.action_type, value)))
                x, y = (without_fields(_dump(o), ignore) for o in (obs, other))
                expect(x == y, f"step {index + 1} after restore() differs from the original episode "
                               f"({value!r}): {y!r} != {x!r} (did the snapshot leave out a random "
                               "generator's state? see openenv.snapshots.rng_state)")
        finally:
            a.close()
            b.close()

    def check_concurrent_sessions(self) -> None:
        a, b = self._new(), self._new()
        try:
            asyncio.run(a.reset_async(seed=self.seed))
            asyncio.run(b.reset_async(seed=self.seed))
            before = _dump(b.state)
            asyncio.run(a.step_async(_action(self.action_type, self.actions()[0])))
            after = _dump(b.state)
        finally:
            a.close()
            b.close()
        expect(before == after, f"stepping one instance changed another's state: {before!r} -> {after!r}")

    @staticmethod
    def _expect_observation(obs: Any, what: str, kind: type[BaseModel]) -> None:
        expect(isinstance(obs, kind), f"{what} returned {type(obs).__name__}, not a {kind.__name__}")
        expect(isinstance(obs.done, bool), f"{what} returned done={obs.done!r}, not a bool")
        reward = obs.reward
        expect(reward is None or (isinstance(reward, int | float) and not isinstance(reward, bool)
                                  and math.isfinite(reward)),
               f"{what} returned reward={reward!r}: use a finite float or None")

    # -- over a real server -----------------------------------------------------------------------

    def check_served(self) -> None:
        from openenv.testing._served import served_env_checks

        served_env_checks(self)
