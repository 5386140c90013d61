"""In-process cost of ``reset`` and ``step`` for every installed env: a table, so a slow env shows.

``python -m bench.envcost [--envs a,b] [--steps 200] [--resets 20] [--budget-s 3] [--json]
[--reset NAME=JSON ...]``

For each env name in the plugin catalogue: import the env (``load ms``, the first import of its
package and libraries), build one instance, then time ``reset(seed=k)`` and ``step(action)`` with
``time.perf_counter_ns`` around the env call alone. Actions are chosen the way ``openenv run``
does (``openenv.cli.run_cmd.Policy``, seeded): among the observation's ``legal_actions`` when it
lists them, else sampled from the action schema. Every loop is bounded twice: by its iteration
count and by ``--budget-s`` of wall time per env. A step that raises (a sampled action the env
refuses) is counted in ``errors`` and not timed; a finished episode is reset (that reset is not
counted in the step column). The first reset is reported apart (``first reset µs``): it often
builds what later resets reuse (a Gymnasium env, a reasoning-gym dataset).

``--reset gymnasium='{"env_id": "CartPole-v1"}'`` passes reset options to one env (repeatable);
``--reset 'cartpole:gymnasium={"env_id": "CartPole-v1"}'`` adds a row under its own label, so one
run can compare several configurations of the same env.

Numbers are medians in microseconds of this process on this machine: compare envs with each
other in one run, not across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EnvCost", "main", "measure_all", "measure_env", "render_table"]


@dataclass
class EnvCost:
    """What was measured for one env (``error`` set when it could not be measured at all)."""

    env: str
    load_ms: float = 0.0
    first_reset_us: float = 0.0
    reset_us: float | None = None
    step_us: float | None = None
    resets: int = 0
    steps: int = 0
    errors: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def _caller(env: Any, name: str) -> Callable[..., Any]:
    """The sync method when the env has one, else its async twin run to completion on a loop."""
    from openenv.env import Environment

    cls = type(env)
    if getattr(cls, name) is not getattr(Environment, name):
        return getattr(env, name)  # type: ignore[no-any-return]
    loop = asyncio.new_event_loop()
    method = getattr(env, f"{name}_async")
    return lambda *a, **kw: loop.run_until_complete(method(*a, **kw))


def _payload(obs: Any) -> dict[str, Any]:
    dump = getattr(obs, "model_dump", None)
    return dump() if callable(dump) else {}


def measure_env(name: str, factory: Callable[[], Any] | None = None, *, steps: int = 200, resets: int = 20,
                budget_s: float = 3.0, seed: int = 0, reset_kwargs: dict[str, Any] | None = None) -> EnvCost:
    """Time one env's ``reset`` and ``step`` (see the module doc). ``factory`` defaults to the
    catalogue entry ``name``; ``steps``/``resets`` bound the iterations, ``budget_s`` the time."""
    from openenv.cli.run_cmd import Policy

    cost = EnvCost(env=name)
    started = time.perf_counter()
    try:
        if factory is None:
            from openenv.plugins import get_plugin_manager

            factory = get_plugin_manager().catalog.envs.get(name).load()
        assert factory is not None
        cost.load_ms = round((time.perf_counter() - started) * 1000, 1)
        env = factory()
    except Exception as exc:
        cost.error = f"could not build: {type(exc).__name__}: {exc}"
        return cost
    kwargs = dict(reset_kwargs or {})
    reset, step = _caller(env, "reset"), _caller(env, "step")
    action_type = getattr(env, "action_type", None) or type(env).action_type
    policy = Policy("random", action_type.model_json_schema(), seed)
    reset_deadline = time.perf_counter() + budget_s / 2
    deadline = time.perf_counter() + budget_s
    try:
        t0 = time.perf_counter_ns()
        obs = reset(seed=seed, **kwargs)
        cost.first_reset_us = round((time.perf_counter_ns() - t0) / 1000, 1)
        reset_ns: list[int] = []
        for k in range(1, resets + 1):
            if time.perf_counter() > reset_deadline and reset_ns:
                cost.notes.append("reset loop cut by the time budget")
                break
            t0 = time.perf_counter_ns()
            obs = reset(seed=seed + k, **kwargs)
            reset_ns.append(time.perf_counter_ns() - t0)
        step_ns: list[int] = []
        episode = resets + 1
        while len(step_ns) < steps and cost.errors < steps:
            if time.perf_counter() > deadline:
                cost.notes.append("step loop cut by the time budget")
                break
            if getattr(obs, "done", False):
                episode += 1
                obs = reset(seed=seed + episode, **kwargs)
            try:
                action = action_type.model_validate(policy.act(_payload(obs)))
            except Exception:
                cost.errors += 1
                continue
            t0 = time.perf_counter_ns()
            try:
                obs = step(action)
            except Exception:
                cost.errors += 1
                continue
            step_ns.append(time.perf_counter_ns() - t0)
    except Exception as exc:
        cost.error = f"reset failed: {type(exc).__name__}: {exc}"
        return cost
    finally:
        try:
            env.close()
        except Exception:
            cost.notes.append("close() raised")
    cost.resets, cost.steps = len(reset_ns), len(step_ns)
    cost.reset_us = round(statistics.median(reset_ns) / 1000, 1) if reset_ns else None
    cost.step_us = round(statistics.median(step_ns) / 1000, 1) if step_ns else None
    return cost


def measure_all(names: Sequence[str] | None = None, *, resets_for: dict[str, dict[str, Any]] | None = None,
                extra: dict[str, tuple[str, dict[str, Any]]] | None = None, **options: Any) -> list[EnvCost]:
    """``measure_env`` for every catalogue env (or just ``names``), in name order; ``resets_for``
    maps an env name to its reset options, ``extra`` adds rows ``label -> (env name, reset options)``."""
    from openenv.errors import UnknownNameError
    from openenv.plugins import get_plugin_manager

    catalog = get_plugin_manager().catalog.envs
    chosen = sorted(catalog.names()) if not names else list(names)
    rows = [(name, name, (resets_for or {}).get(name)) for name in chosen]
    rows += [(label, name, kwargs) for label, (name, kwargs) in sorted((extra or {}).items())]
    results = []
    for label, name, kwargs in rows:
        if name not in catalog:
            raise UnknownNameError("env", name, catalog.names())
        started = time.perf_counter()
        try:
            factory = catalog.get(name).load()
        except Exception as exc:
            results.append(EnvCost(env=label, error=f"could not load: {exc}"))
            continue
        load_ms = round((time.perf_counter() - started) * 1000, 1)
        cost = measure_env(name, factory, reset_kwargs=kwargs, **options)
        cost.env, cost.load_ms = label, load_ms
        results.append(cost)
    return results


def _parse_reset(text: str) -> tuple[str, str, dict[str, Any]]:
    """``[label:]name=JSON`` -> (label, name, options)."""
    target, sep, doc = text.partition("=")
    label, _, name = target.rpartition(":")
    try:
        options = json.loads(doc) if sep else None
    except ValueError as exc:
        raise SystemExit(f"--reset {text!r}: the options are not JSON ({exc})") from None
    if not name or not isinstance(options, dict):
        raise SystemExit(f"--reset {text!r}: write NAME='{{\"option\": value}}' or LABEL:NAME='{{...}}'")
    return label or name, name, options


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def render_table(results: Sequence[EnvCost]) -> str:
    head = ("env", "load ms", "first reset µs", "reset µs", "step µs", "resets", "steps", "errors", "notes")
    rows = [head] + [
        (r.env, _fmt(r.load_ms), _fmt(r.first_reset_us), _fmt(r.reset_us), _fmt(r.step_us), str(r.resets),
         str(r.steps), str(r.errors), r.error or "; ".join(r.notes))
        for r in results
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.ljust(w) if i in (0, len(head) - 1) else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.envcost", description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="", help="comma-separated env names (default: every installed env)")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per env (default 200)")
    parser.add_argument("--resets", type=int, default=20, help="timed resets per env (default 20)")
    parser.add_argument("--budget-s", type=float, default=3.0, help="wall-time cap per env (default 3 s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--reset", action="append", default=[], metavar="[LABEL:]NAME=JSON",
                        help="reset options for an env (with LABEL: an extra row); repeatable")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.envs.split(",") if n.strip()]
    resets_for: dict[str, dict[str, Any]] = {}
    extra: dict[str, tuple[str, dict[str, Any]]] = {}
    for text in args.reset:
        label, name, options = _parse_reset(text)
        if label == name:
            resets_for[name] = options
        else:
            extra[label] = (name, options)
    results = measure_all(names, resets_for=resets_for, extra=extra, steps=args.steps, resets=args.resets,
                          budget_s=args.budget_s, seed=args.seed)
    if args.json:
        print(json.dumps({"schema": "openenv.envcost/1", "results": [asdict(r) for r in results]}, indent=2))
    else:
        print(render_table(results))
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
