"""``openenv rubrics``: list the installed rubrics, re-score stored rollouts.

JSON schema of ``openenv rubrics list --json`` (``openenv.rubrics/1``)::

    {"schema": "openenv.rubrics/1",
     "rubrics": [{"name": "exact_match", "ref": "openenv_rubrics.builtin:ExactMatch",
                  "plugin": "rubrics", "description": "..."}]}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from openenv.cli.output import EXIT_USAGE, console, fail, print_json, table

__all__ = ["SCHEMA", "app"]

SCHEMA = "openenv.rubrics/1"

app = typer.Typer(help="List rubrics and re-score stored rollouts.", no_args_is_help=True)


@app.command("list")
def list_rubrics(
    as_json: Annotated[bool, typer.Option("--json", help=f"Print JSON ({SCHEMA}).")] = False,
) -> None:
    """List the rubrics registered by installed plugins (nothing is imported to list them)."""
    from openenv.plugins import get_plugin_manager

    entries = list(get_plugin_manager().catalog.rubrics)
    if as_json:
        print_json({"schema": SCHEMA, "rubrics": [e.to_json() for e in entries]})
        return
    out = console()
    if not entries:
        out.print("No rubrics installed. Install one, e.g. `pip install openenvkit-rubrics`.")
        return
    t = table("Rubric", "Plugin", "Description", caption=f"{len(entries)} rubrics", identifiers=("Rubric", "Plugin"))
    for e in entries:
        t.add_row(e.name, e.plugin, e.description or "-")
    out.print(t)


@app.command("rescore")
def rescore_cmd(
    path_in: Annotated[Path, typer.Argument(help="An openenv.rollout/1 file (openenv collect) or a JSONL of steps.")],
    rubric: Annotated[str, typer.Option("--rubric", "-r", help="NAME[=CONFIG], CONFIG as JSON or k=v,k=v.")],
    out: Annotated[Path, typer.Option("--output", "-o", help="Where to write the re-scored JSONL.")],
    episode: Annotated[bool, typer.Option("--episode", help="One score per episode instead of per step.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Score every step of a rollout file again with RUBRIC and write the result to OUT.

    Reads what `openenv collect` writes (openenv.rollout/1, one episode per line; each action is
    scored with the observation that followed it) and the step-per-line JSONL."""
    from openenv.errors import ConfigError, RuleViolation, UnknownNameError
    from openenv.rubric import RubricError
    from openenv_rubrics.config import rubric_from_spec
    from openenv_rubrics.rescore import RescoreError, rescore

    if not path_in.is_file():
        fail(f"no such file: {path_in}", EXIT_USAGE)
    if out.resolve() == path_in.resolve():
        fail("the output must not overwrite the input; choose another -o path.", EXIT_USAGE)
    try:
        built = rubric_from_spec(rubric)
    except (ConfigError, UnknownNameError, RuleViolation) as exc:
        fail(str(exc), EXIT_USAGE)
    if not episode and not built.per_step:  # the flag's name, not the library's `level=` argument
        fail(f"rubric '{built.name}' scores whole episodes only: add --episode (one score per episode).",
             EXIT_USAGE)
    try:
        summary = rescore(path_in, built, out, level="episode" if episode else "step")
    except (RescoreError, RubricError, ValueError, RuleViolation) as exc:
        fail(str(exc))
    if as_json:
        print_json(summary.to_json())
        return
    mean = "-" if summary.mean_reward is None else f"{summary.mean_reward:.4f}"
    console().print(f"re-scored {summary.written} {'episodes' if episode else 'steps'} "
                    f"({summary.episodes} episodes, {summary.lines} lines) with '{built.name}' -> {out}; "
                    f"mean reward {mean}; fallbacks {summary.fallbacks}"
                    + (f"; skipped {summary.skipped} episodes without steps" if summary.skipped else ""))
