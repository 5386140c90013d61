"""What ``openenv validate`` checks, and how a target (name, folder, reference) is resolved.

A check is a named function returning nothing on success or raising ``CheckFailed`` (the
problem and the fix) or ``NotApplicable`` (why it cannot apply to this env, e.g. no oracle is
declared). ``Report.run`` turns every outcome — including an unexpected exception from the env's
own code — into a ``Check`` row, so validate never prints a traceback.

Static checks here read the manifest and the env class; the runtime checks that play the env
in-process live here too (random and oracle episodes, seeding, reward range, state, budgets);
the wire-level checks that need a server are in ``openenv.cli._validate_wire``.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from openenv.manifest import MANIFEST_FILENAME, Manifest, ManifestError, load_manifest
from openenv.testing.env_contract import without_fields

if TYPE_CHECKING:
    from openenv.env import Environment

__all__ = ["Check", "CheckFailed", "NotApplicable", "Report", "Target", "episode", "static_checks",
           "runtime_checks"]


class CheckFailed(Exception):
    """A check found a problem: ``message`` says what, ``fix`` what to do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix


class NotApplicable(Exception):
    """The check cannot apply to this env; the message says why (never silent)."""


@dataclass
class Check:
    name: str
    status: str  # "pass" | "fail" | "n/a"
    detail: str = ""
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass
class Report:
    target: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def run(self, name: str, fn: Callable[[], str | None]) -> bool:
        try:
            detail = fn() or ""
        except CheckFailed as exc:
            self.checks.append(Check(name, "fail", exc.message, exc.fix))
            return False
        except NotApplicable as exc:
            self.checks.append(Check(name, "n/a", str(exc)))
            return True
        except Exception as exc:  # the env's own code raised: report it, never a traceback
            self.checks.append(Check(name, "fail", f"{type(exc).__name__}: {exc}",
                                     "Fix the env code that raised (run it under pytest to see the traceback)."))
            return False
        self.checks.append(Check(name, "pass", detail))
        return True

    def to_json(self) -> dict[str, Any]:
        return {"schema": "openenv.validate/1", "target": self.target, "ok": self.ok,
                "checks": [c.to_json() for c in self.checks]}


@dataclass
class Target:
    """What is being validated: the env reference, its manifest (if any), where it came from."""

    label: str
    ref: str | None = None
    manifest_path: Path | None = None
    manifest: Manifest | None = None
    manifest_error: str | None = None
    env: Any = None  # the loaded class (after the entry-point check)


# -- static ---------------------------------------------------------------------------------------


def _check_manifest(target: Target) -> str:
    if target.manifest_path is None:
        raise CheckFailed(
            f"no {MANIFEST_FILENAME} for '{target.label}'",
            f"Ship an {MANIFEST_FILENAME} in the package and register it: registry.register(name, ref, "
            "manifest=\"pkg:openenv.yaml\") (see docs/manifest.md).")
    try:
        target.manifest = load_manifest(target.manifest_path)
    except ManifestError as exc:
        raise CheckFailed(str(exc), "Correct the fields named above (docs/manifest.md lists every field).") from None
    return str(target.manifest_path)


def _check_entry_point(target: Target) -> str:
    from openenv.env import Environment, env_class_of
    from openenv.errors import RuleViolation
    from openenv.registry import load_ref

    if target.ref is None:
        raise CheckFailed(
            f"no env reference for '{target.label}'",
            "Add `env: my_pkg.env:MyEnv` to openenv.yaml, or install the package so its entry point registers it.")
    if target.manifest_path is not None:  # a src layout or a flat folder: importable without install
        for folder in (target.manifest_path.parent.parent, target.manifest_path.parent):
            if str(folder) not in sys.path:
                sys.path.append(str(folder))
    try:
        obj = load_ref(target.ref)
    except Exception as exc:
        cause = exc.__cause__ or exc
        fix = ("The kernel refused the env's definition (e.g. a tool named reset/step/state/close): "
               "fix what the message names." if isinstance(cause, RuleViolation) else
               "Check the module path and the name after the colon; install the package "
               "(`uv pip install -e PATH`).")
        raise CheckFailed(f"'{target.ref}' does not load: {type(cause).__name__}: {cause}", fix) from None
    cls = env_class_of(obj)
    if not (isinstance(cls, type) and issubclass(cls, Environment)):
        kind = f"class {obj.__qualname__}" if isinstance(obj, type) else type(obj).__name__
        raise CheckFailed(
            f"'{target.ref}' is a {kind}, not an Environment subclass",
            "Point the reference at your env class (`module:MyEnv`, a subclass of "
            "openenv.env.Environment), or at a factory annotated `-> MyEnv`.")
    target.env = obj
    return f"{cls.__module__}.{cls.__qualname__}"


def _env_class(target: Target) -> type[Environment[Any, Any, Any]]:
    from openenv.env import env_class_of

    if target.env is None:
        raise NotApplicable("the entry point did not load (see entry_point)")
    cls = env_class_of(target.env)
    assert cls is not None
    return cast("type[Environment[Any, Any, Any]]", cls)


def _check_types(target: Target) -> str:
    from openenv.errors import RuleViolation
    from openenv.types import Action, Observation

    cls = _env_class(target)
    try:
        action = cls.action_type
    except RuleViolation as exc:
        raise CheckFailed(str(exc), "Parametrise the class: Environment[MyAction, MyObservation, MyState].") from None
    if action is Action or not issubclass(action, Action):
        raise CheckFailed(f"action type of {cls.__qualname__} is {action!r}",
                          "Declare an Action subclass with your fields: Environment[MyAction, ...].")
    obs = cls.observation_type
    if not (isinstance(obs, type) and issubclass(obs, Observation)):
        raise CheckFailed(f"observation type {obs!r} is not an Observation subclass",
                          "Declare an Observation subclass: Environment[MyAction, MyObservation, ...].")
    return f"action {action.__name__}, observation {obs.__name__}, state {cls.state_type.__name__}"


def _check_schemas(target: Target) -> str:
    cls = _env_class(target)
    try:
        action_schema = cls.action_type.model_json_schema()
        cls.observation_type.model_json_schema()
    except Exception as exc:
        raise CheckFailed(f"JSON Schema generation failed: {exc}",
                          "Use JSON-able field types (str, int, float, bool, lists, dicts, models).") from None
    # Whether valid actions can be drawn from it (or from `legal_actions`) is what random_episodes shows.
    return f"{len(action_schema.get('properties', {}))} action field(s)"


def _check_reward_range(target: Target) -> str:
    if target.manifest is None:
        raise CheckFailed("no manifest, so no declared reward range",
                          "Add `reward_range: [low, high]` to openenv.yaml.")
    if target.manifest.reward_range is None:
        raise CheckFailed("reward_range is not declared",
                          f"Add `reward_range: [low, high]` to {target.manifest_path} (every reward the env "
                          "gives must lie in it).")
    low, high = target.manifest.reward_range
    return f"[{low}, {high}]"


def _check_tools(target: Target) -> str:
    from openenv.env import CONTROL_NAMES
    from openenv.tools import ToolEnvironment

    cls = _env_class(target)
    declared = list(target.manifest.tools) if target.manifest else []
    if not issubclass(cls, ToolEnvironment):
        if declared:
            raise CheckFailed(f"openenv.yaml declares tools {declared} but {cls.__qualname__} is not a "
                              "ToolEnvironment", "Remove `tools:` or derive from openenv.tools.ToolEnvironment.")
        raise NotApplicable(f"{cls.__qualname__} is not a tool env")
    env = target.env()
    try:
        names = sorted({spec.name for spec in env.list_tools()})
    finally:
        env.close()
    reserved = sorted(set(names) & CONTROL_NAMES)
    if reserved:
        raise CheckFailed(f"tools use reserved names {reserved}",
                          "Rename them (reset/step/state/close are the control protocol).")
    missing = sorted(set(declared) - set(names))
    if missing:
        raise CheckFailed(f"openenv.yaml declares tools {missing} the env does not have (it has {names})",
                          "Fix the names under `tools:` or add the @tool methods.")
    return ", ".join(names) or "no tools"


_MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "add",
                       "discard", "setdefault", "__setitem__"})


def _module_state_writes(cls: type) -> list[str]:
    """Module-level names that ``cls``'s protocol methods write (``global x``, ``X[k] = ...``,
    ``X.attr = ...``, ``X.append(...)``...), as ``method: name`` strings."""
    import ast
    import inspect
    import textwrap

    module = sys.modules.get(cls.__module__)
    module_names = set(vars(module)) if module is not None else set()
    found: list[str] = []
    for klass in cls.__mro__:
        if klass.__module__.startswith("openenv."):
            continue
        for method in ("reset", "step", "reset_async", "step_async"):
            fn = klass.__dict__.get(method)
            if not callable(fn):
                continue
            try:
                tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
            except (OSError, TypeError, SyntaxError):
                continue
            func = tree.body[0]
            params = {a.arg for a in ast.walk(func) if isinstance(a, ast.arg)}
            assigned = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            local = params | assigned

            def base(node: ast.AST) -> str | None:
                while isinstance(node, ast.Subscript | ast.Attribute):
                    node = node.value
                return node.id if isinstance(node, ast.Name) else None

            for node in ast.walk(func):
                names: list[str | None] = []
                if isinstance(node, ast.Global):
                    names = list(node.names)
                elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [base(t) for t in targets if isinstance(t, ast.Subscript | ast.Attribute)]
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                        node.func.attr in _MUTATORS):
                    names = [base(node.func.value)]
                for name in names:
                    if name and name not in local and name in module_names and f"{method}: {name}" not in found:
                        found.append(f"{method}: {name}")
    return found


def _check_concurrency(target: Target) -> str:
    from openenv.env import env_traits

    cls = _env_class(target)
    if not env_traits(cls)["SUPPORTS_CONCURRENT_SESSIONS"]:
        raise NotApplicable(f"{cls.__qualname__} does not declare SUPPORTS_CONCURRENT_SESSIONS (one session "
                            "per server)")
    writes = _module_state_writes(cls)
    if writes:
        raise CheckFailed(
            f"{cls.__qualname__} declares SUPPORTS_CONCURRENT_SESSIONS but its methods write module-level "
            f"state ({', '.join(writes)}), which every session shares",
            "Keep episode state on self, or set SUPPORTS_CONCURRENT_SESSIONS = False.")
    return "no module-level state written by reset/step"


def _check_tasks(target: Target) -> str:
    """The declared tasks load (every row, id and split), and each split's first and last task
    resets the env in-process: a task the env cannot play is caught here, not mid-training."""
    from openenv.tasks import TaskError, tasks_of

    cls = _env_class(target)
    folder = target.manifest_path.parent if target.manifest_path is not None else None
    try:
        source = tasks_of(cls, manifest=target.manifest, folder=folder)
        if source is None:
            raise NotApplicable("the env declares no tasks (set `tasks = TaskFile(...)/SeedTasks(...)/"
                                "InlineTasks(...)` on the class, or `tasks:` in openenv.yaml, to serve splits)")
        source.validate()
        splits = source.splits()
    except TaskError as exc:
        raise CheckFailed(f"the tasks do not load: {exc}", "Fix the file, row or id named above "
                          "(docs/writing-an-env.md, 'Tasks and splits').") from None
    if not splits:
        raise CheckFailed("the task source declares no splits", "Give it at least a train split.")
    empty = [s.name for s in splits if s.num_tasks == 0]
    if empty:
        raise CheckFailed(f"split(s) {', '.join(empty)} have no tasks", "Add tasks to them or drop the split.")
    for split in splits:
        for index in sorted({0, split.num_tasks - 1}):
            task = source.task_at(split.name, index)
            env = target.env()
            try:
                env.reset(seed=task.seed, task=task)
            except Exception as exc:
                raise CheckFailed(f"task '{task.id}' (split {split.name}) does not reset the env: "
                                  f"{type(exc).__name__}: {exc}",
                                  "Make reset(task=...) build the episode from task.seed and task.data, "
                                  "or fix the task's data.") from None
            finally:
                env.close()
    listed = ", ".join(f"{s.name} ({s.type}, {s.num_tasks} tasks)" for s in splits)
    return f"{listed}; the first and last task of each split reset the env"


def static_checks(report: Report, target: Target) -> None:
    report.run("manifest", lambda: _check_manifest(target))
    report.run("entry_point", lambda: _check_entry_point(target))
    report.run("types", lambda: _check_types(target))
    report.run("schemas", lambda: _check_schemas(target))
    report.run("reward_range_declared", lambda: _check_reward_range(target))
    report.run("tools", lambda: _check_tools(target))
    report.run("concurrency_flags", lambda: _check_concurrency(target))
    report.run("tasks", lambda: _check_tasks(target))


# -- runtime (in-process) -------------------------------------------------------------------------


@dataclass
class Episode:
    rewards: list[float] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)
    done: bool = False
    max_step_s: float = 0.0
    reset_s: float = 0.0
    step_counts: list[int] = field(default_factory=list)

    @property
    def total(self) -> float:
        return sum(self.rewards)


def _dump(obs: Any) -> Any:
    return obs.model_dump(mode="json") if hasattr(obs, "model_dump") else obs


def episode(factory: Callable[[], Any], choose: Callable[[Any], dict[str, Any]], *, seed: int,
            max_steps: int) -> Episode:
    """Play one episode in-process; ``choose(observation_dict) -> action dict``."""
    env = factory()
    result = Episode()
    try:
        start = time.perf_counter()
        obs = env.reset(seed=seed)
        result.reset_s = time.perf_counter() - start
        result.observations.append(_dump(obs))
        for _ in range(max_steps):
            action = env.action_type.model_validate(choose(_dump(obs)))
            start = time.perf_counter()
            obs = env.step(action)
            result.max_step_s = max(result.max_step_s, time.perf_counter() - start)
            result.observations.append(_dump(obs))
            result.rewards.append(float(obs.reward) if obs.reward is not None else 0.0)
            result.step_counts.append(env.state.step_count)
            if obs.done:
                result.done = True
                break
    finally:
        env.close()
    return result


def _random_chooser(cls: type[Environment[Any, Any, Any]], seed: int) -> Callable[[Any], dict[str, Any]]:
    from openenv.cli.run_cmd import Policy

    policy = Policy("random", cls.action_type.model_json_schema(), seed)
    return policy.act


def runtime_checks(report: Report, target: Target, *, episodes: int = 3) -> None:
    """Play the env in-process: random and oracle episodes, rewards, seeding, state, budgets."""
    if target.env is None:
        reason = "the entry point did not load (see entry_point)"
        for name in ("random_episodes", "reward_in_range", "oracle", "seeded_determinism",
                     "state_consistent", "time_budget"):
            report.checks.append(Check(name, "n/a", reason))
        return
    cls = _env_class(target)
    manifest = target.manifest or Manifest(name=target.label)
    played: list[Episode] = []

    def random_episodes() -> str:
        for k in range(episodes):
            try:
                played.append(episode(target.env, _random_chooser(cls, k), seed=k,
                                      max_steps=manifest.max_episode_steps))
            except Exception as exc:
                raise CheckFailed(f"episode {k} (seed {k}) raised {type(exc).__name__}: {exc}",
                                  "Fix reset/step so they never raise on a valid action; refuse bad "
                                  "input through the action type's field constraints.") from None
        steps = sum(len(e.rewards) for e in played)
        return f"{episodes} episodes, {steps} steps, mean return {sum(e.total for e in played) / episodes:.3g}"

    if not report.run("random_episodes", random_episodes):
        played.clear()

    oracle_played: list[Episode] = []
    report.run("oracle", lambda: _oracle(target, manifest, played, episodes, oracle_played))

    def reward_in_range() -> str:
        every = played + oracle_played
        if not every:
            raise NotApplicable("no episode was played (see random_episodes)")
        if manifest.reward_range is None:
            raise CheckFailed("no reward_range declared to check against", "Add `reward_range: [low, high]`.")
        low, high = manifest.reward_range
        bad = [r for e in every for r in e.rewards if not (math.isfinite(r) and low <= r <= high)]
        if bad:
            raise CheckFailed(f"rewards {bad[:5]} lie outside the declared range [{low}, {high}]",
                              "Widen reward_range in openenv.yaml, or fix the env's reward.")
        kinds = f"{len(played)} random" + (f" and {len(oracle_played)} oracle" if oracle_played else "")
        return f"{sum(len(e.rewards) for e in every)} rewards of {kinds} episode(s) in [{low}, {high}]"

    report.run("reward_in_range", reward_in_range)

    def determinism() -> str:
        first = episode(target.env, _random_chooser(cls, 7), seed=7, max_steps=min(manifest.max_episode_steps, 50))
        second = episode(target.env, _random_chooser(cls, 7), seed=7, max_steps=min(manifest.max_episode_steps, 50))
        volatile = set(manifest.volatile_fields)
        one = [without_fields(o, volatile) for o in first.observations]
        two = [without_fields(o, volatile) for o in second.observations]
        if one != two or first.rewards != second.rewards:
            where = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b),
                         min(len(one), len(two)))
            raise CheckFailed(f"seed 7 gave different episodes (first difference at observation {where})",
                              "Draw every random choice from random.Random(seed) created in reset; list "
                              "fields that legitimately vary (timings, per-session paths) in the "
                              "manifest's volatile_fields.")
        return f"seed 7 replayed identically ({len(first.rewards)} steps)"

    report.run("seeded_determinism", determinism)

    def state_consistent() -> str:
        if not played:
            raise NotApplicable("no episode was played (see random_episodes)")
        for e in played:
            if e.step_counts != list(range(1, len(e.step_counts) + 1)):
                raise CheckFailed(f"state.step_count went {e.step_counts[:8]} over steps 1..{len(e.step_counts)}",
                                  "Increment state.step_count once per step and reset it to 0 in reset.")
        return "step_count matches the steps taken"

    report.run("state_consistent", state_consistent)

    def time_budget() -> str:
        if not played:
            raise NotApplicable("no episode was played (see random_episodes)")
        worst_step = max(e.max_step_s for e in played)
        worst_reset = max(e.reset_s for e in played)
        if worst_reset > manifest.reset_budget_s:
            raise CheckFailed(f"a reset took {worst_reset:.3f}s, over reset_budget_s={manifest.reset_budget_s}",
                              "Make reset faster or raise reset_budget_s in openenv.yaml.")
        if worst_step > manifest.step_budget_s:
            raise CheckFailed(f"a step took {worst_step:.3f}s, over step_budget_s={manifest.step_budget_s}",
                              "Make step faster or raise step_budget_s in openenv.yaml.")
        return f"slowest reset {worst_reset * 1000:.1f} ms, slowest step {worst_step * 1000:.1f} ms"

    report.run("time_budget", time_budget)


def _oracle(target: Target, manifest: Manifest, played: list[Episode], episodes: int,
            runs: list[Episode]) -> str:
    """Play the declared oracle ``episodes`` times (into ``runs``) and compare it with random."""
    from openenv.registry import load_ref

    if manifest.oracle is None:
        raise NotApplicable("no `oracle:` declared in openenv.yaml (add `oracle: pkg.mod:fn` to check "
                            "that a scripted policy beats random)")
    try:
        oracle = load_ref(manifest.oracle)
    except Exception as exc:
        raise CheckFailed(f"oracle '{manifest.oracle}' does not load: {exc}",
                          "Point `oracle:` at a function taking an observation dict and returning an "
                          "action dict.") from None
    for k in range(episodes):
        runs.append(episode(target.env, oracle, seed=k, max_steps=manifest.max_episode_steps))
    oracle_mean = sum(e.total for e in runs) / episodes
    if not played:
        raise NotApplicable(f"oracle mean return {oracle_mean:.3g}, but no random episode to compare with")
    random_mean = sum(e.total for e in played) / len(played)
    if oracle_mean < random_mean + manifest.oracle_margin:
        raise CheckFailed(f"oracle mean return {oracle_mean:.3g} does not beat random {random_mean:.3g} by "
                          f"oracle_margin={manifest.oracle_margin}",
                          "Fix the oracle or the reward, or lower oracle_margin.")
    return f"oracle {oracle_mean:.3g} vs random {random_mean:.3g} (margin {manifest.oracle_margin})"
