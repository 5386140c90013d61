"""``openenv harbor info|rollout|serve PATH``: describe a suite, play one task, serve it.

* ``info PATH`` – every task: split, difficulty, category, runtime (local box or Docker, and why),
  timeouts; the folders that do not load, with their error (exit 1 if any).
* ``rollout PATH TASK`` – play one task in-process with a policy (``oracle``, ``noop`` or a
  ``module:callable`` taking ``(observation_dict, ctx)``), graded in a separate box; prints the
  grade (exit 1 when the episode scored below 1).
* ``serve PATH`` – ``openenv serve harbor:PATH`` (options after PATH are passed on).
  ``rollout`` and ``serve`` take ``--runtime auto|local|docker|kubernetes`` (``$OPENENV_HARBOR_RUNTIME``).
* ``push PATH --registry HOST:PORT/NAMESPACE`` – build every task's image offline (the Docker
  runtime's build) and push it as ``HOST:PORT/NAMESPACE/<task>:<digest of its Dockerfile>``; the
  local tags are removed afterwards. ``--dry-run`` prints the plan only. Exit 1 if a task fails.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from openenv_harbor.task import HarborTaskError, load_suite

__all__ = ["app"]

app = typer.Typer(help="Harbor-format task suites: describe, play one task, serve (docs/harbor.md).",
                  no_args_is_help=True)


def _suite_or_exit(path: Path) -> Any:
    try:
        return load_suite(path)
    except HarborTaskError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command("info")
def info(path: Annotated[Path, typer.Argument(help="A Harbor task folder or a folder of them.")],
         as_json: Annotated[bool, typer.Option("--json", help="One JSON document.")] = False) -> None:
    """Describe a task or a suite: each task's split, difficulty, runtime and timeouts."""
    suite = _suite_or_exit(path)
    rows = [{"id": t.id, "split": t.split, "difficulty": t.metadata.get("difficulty"),
             "category": t.metadata.get("category"), "runtime": "docker" if t.local_blocker else "local",
             "why_docker": t.local_blocker, "agent_timeout_s": t.agent_timeout_s,
             "verifier_timeout_s": t.verifier_timeout_s, "allow_internet": t.allow_internet} for t in suite.tasks]
    errors = {name: str(exc) for name, exc in suite.errors.items()}
    if as_json:
        typer.echo(json.dumps({"suite": str(suite.root), "tasks": rows, "errors": errors}, indent=2))
    else:
        from openenv.cli.output import console, table

        t = table("Task", "Split", "Difficulty", "Category", "Runtime", "Agent s", "Verifier s",
                  title=f"{suite.root}: {len(rows)} tasks", identifiers=("Task",),
                  optional=("Category", "Difficulty"))
        for r in rows:
            t.add_row(r["id"], r["split"], str(r["difficulty"] or ""), str(r["category"] or ""), r["runtime"],
                      f"{r['agent_timeout_s']:g}", f"{r['verifier_timeout_s']:g}")
        console().print(t)
        for name, error in errors.items():
            typer.echo(f"not loaded: {name}: {error}", err=True)
    if errors:
        raise typer.Exit(1)


def _policy(spec: str) -> Any:
    from openenv_harbor import policies

    if spec in ("oracle", "noop"):
        return getattr(policies, spec)
    module, colon, attr = spec.partition(":")
    if not colon:
        typer.echo(f"error: unknown policy {spec!r}: use oracle, noop or 'module:callable'", err=True)
        raise typer.Exit(2)
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        typer.echo(f"error: policy {spec!r} does not load: {exc}", err=True)
        raise typer.Exit(2) from None


def _runtime_or_exit(runtime: str | None) -> None:
    from openenv_harbor.env import RUNTIMES

    if runtime is not None and runtime not in RUNTIMES:
        typer.echo(f"error: --runtime {runtime!r}: use one of {', '.join(RUNTIMES)}", err=True)
        raise typer.Exit(2)


@app.command("rollout")
def rollout(path: Annotated[Path, typer.Argument(help="A Harbor task folder or a folder of them.")],
            task: Annotated[str, typer.Argument(help="The task id to play (its folder name).")],
            policy: Annotated[str, typer.Option("--policy", help="oracle, noop or module:callable.")] = "oracle",
            max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Step budget.")] = 50,
            runtime: Annotated[str | None, typer.Option("--runtime", help="auto, local, docker or kubernetes "
                                                        "(default: $OPENENV_HARBOR_RUNTIME, else auto).")]
            = None) -> None:
    """Play one task with a policy, graded in a separate box; print the grade."""
    from openenv.errors import ValidationError
    from openenv_harbor.env import HarborAction, HarborEnv

    act = _policy(policy)
    suite = _suite_or_exit(path)
    _runtime_or_exit(runtime)
    env = HarborEnv(path=str(suite.root), max_steps=max_steps, runtime=runtime)
    try:
        try:
            obs = env.reset(task_id=task)
        except ValidationError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        ctx = SimpleNamespace(t=0, task_id=task, state={})
        while not obs.done:
            action = act(obs.model_dump(), ctx)
            obs = env.step(HarborAction(**action) if isinstance(action, dict) else action)
            ctx.t += 1
        typer.echo(json.dumps({"task": task, "reward": obs.reward, "steps": ctx.t, "grade": obs.grade}, indent=2))
    finally:
        env.close()
    if (obs.reward or 0.0) < 1.0:
        raise typer.Exit(1)


@app.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve(ctx: typer.Context,
          path: Annotated[Path, typer.Argument(help="A Harbor task folder or a folder of them.")],
          runtime: Annotated[str | None, typer.Option("--runtime", help="auto, local, docker or kubernetes "
                                                      "(sets $OPENENV_HARBOR_RUNTIME for the server).")]
          = None) -> None:
    """Serve the suite: `openenv serve harbor:PATH` (the options after PATH go to it)."""
    _suite_or_exit(path)  # a usage error here, before a server starts
    _runtime_or_exit(runtime)
    if runtime is not None:
        os.environ["OPENENV_HARBOR_RUNTIME"] = runtime
    argv = [sys.executable, "-m", "openenv", "serve", f"harbor:{path.resolve()}", *ctx.args]
    os.execv(sys.executable, argv)


@app.command("push")
def push(path: Annotated[Path, typer.Argument(help="A Harbor task folder or a folder of them.")],
         registry: Annotated[str, typer.Option("--registry", help="OCI registry target HOST:PORT/NAMESPACE.")],
         dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (JSON); build and send nothing.")]
         = False) -> None:
    """Build each task's image offline and push it to a registry."""
    from openenv_harbor import docker as docker_rt

    suite = _suite_or_exit(path)
    target = registry.rstrip("/")
    if not target or "://" in target:
        typer.echo(f"error: --registry {registry!r}: give HOST:PORT/NAMESPACE (no scheme), e.g. "
                   "127.0.0.1:5000/harbor", err=True)
        raise typer.Exit(2)
    plan = [{"task": t.id, "image": f"{target}/{t.id}:{docker_rt.dockerfile_digest(t)}"} for t in suite.tasks]
    if dry_run:
        typer.echo(json.dumps({"registry": target, "images": plan,
                               "not_loaded": {n: str(e) for n, e in suite.errors.items()}}, indent=2))
        return
    if not docker_rt.available():
        typer.echo("error: no Docker engine answers here (start one, or .ci/docker-setup.sh)", err=True)
        raise typer.Exit(2)
    failed = {name: str(exc) for name, exc in suite.errors.items()}
    for task, row in zip(suite.tasks, plan, strict=True):
        try:
            docker_rt.push(task, row["image"])
            typer.echo(f"pushed {row['image']}")
        except HarborTaskError as exc:
            failed[task.id] = str(exc)
    for name, error in failed.items():
        typer.echo(f"FAILED {name}: {error}", err=True)
    if failed:
        raise typer.Exit(1)
