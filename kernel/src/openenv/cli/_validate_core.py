"""What ``openenv validate`` checks, and how a target (name, folder, reference) is resolved.

A check is a named function returning nothing on success or raising ``CheckFailed`` (the
problem and the fix) or ``NotApplicable`` (why it cannot apply to this env, e.g. no oracle is
declared). ``Report.run`` turns every outcome — including an unexpected exception from the env's
own code — into a ``Check`` row, so validate never prints a traceback.

Static checks here read the manifest and the env class; the runtime checks that play the env
in-process (random and oracle episodes, seeding, reward range, state, budgets) are in
``openenv.cli._validate_runtime``; the wire-level checks that need a server are in
``openenv.cli._validate_wire``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from openenv.manifest import MANIFEST_FILENAME, Manifest, ManifestError, load_manifest

if TYPE_CHECKING:
    from openenv.env import Environment

__all__ = ["Check", "CheckFailed", "NotApplicable", "Report", "Target", "env_class", "static_checks"]


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


def env_class(target: Target) -> type[Environment[Any, Any, Any]]:
    from openenv.env import env_class_of

    if target.env is None:
        raise NotApplicable("the entry point did not load (see entry_point)")
    cls = env_class_of(target.env)
    assert cls is not None
    return cast("type[Environment[Any, Any, Any]]", cls)


def _check_types(target: Target) -> str:
    from openenv.errors import RuleViolation
    from openenv.types import Action, Observation

    cls = env_class(target)
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
    cls = env_class(target)
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

    cls = env_class(target)
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

    cls = env_class(target)
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

    cls = env_class(target)
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
