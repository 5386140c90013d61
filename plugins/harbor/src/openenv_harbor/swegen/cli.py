"""``openenv tasks generate swe``: Harbor-format SWE tasks from real projects' code and tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from openenv_harbor.swegen.sources import DEFAULT_PROJECTS, SweGenError, default_cache, parse_project

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Generated task suites.")
generate_app = typer.Typer(no_args_is_help=True, help="Generate a task suite.")
app.add_typer(generate_app, name="generate")

_DEFAULTS = ", ".join(p.spec for p in DEFAULT_PROJECTS)


@generate_app.command("swe")
def swe(
    projects: Annotated[list[str] | None,
                        typer.Argument(help=f"NAME==VERSION of PyPI projects (default: {_DEFAULTS})")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="the suite folder to write")] = Path("swe-suite"),
    max_per_project: Annotated[int, typer.Option("--max-per-project", help="tasks per project at most")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="the order mutations are tried in")] = 0,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="mutations tried at once")] = 2,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="sdist cache (default: "
                                                   "$OPENENV_SWEGEN_CACHE or ~/.cache/openenv/swegen)")] = None,
    test_projects: Annotated[str, typer.Option("--test-projects", help="comma-separated project names put in "
                                               "the test split (default: the built-in list's own)")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Inject bugs into functions real projects' tests cover; keep those some tests catch; write Harbor tasks."""
    from openenv_harbor.swegen.generate import generate_suite

    try:
        chosen = [parse_project(p) for p in projects] if projects else list(DEFAULT_PROJECTS)
        summary = generate_suite(chosen, out, max_per_project=max_per_project, seed=seed, jobs=jobs,
                                 cache=cache_dir or default_cache(),
                                 test_projects=[t for t in test_projects.split(",") if t],
                                 log=lambda line: typer.echo(line, err=True))
    except SweGenError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps(summary.to_dict(), indent=1))
        return
    for p in summary.projects:
        typer.echo(f"{p.project:24} {p.split:5} candidates={p.candidates} tried={p.tried} kept={p.kept} "
                   f"({p.seconds:.0f}s)")
    typer.echo(f"{summary.kept} tasks from {summary.tried} mutations tried (yield {summary.yield_:.2f}) in "
               f"{summary.seconds:.0f}s: {summary.per_minute:.1f} tasks/min -> {summary.out}")
