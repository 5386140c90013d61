"""``openenv run`` and ``openenv collect`` agree: the same built-in policy names, the same
``--max-steps`` default; and the collect bar says what its numbers are (a rate, elapsed, ETA)."""

from __future__ import annotations

import inspect
import io
import typing

import typer.main

from openenv.cli.main import build_app
from openenv.cli.run_cmd import DEFAULT_MAX_STEPS, SCHEMA_POLICIES


def _options(command: str) -> dict[str, object]:
    root = typer.main.get_command(build_app([command]))
    cmd = root.commands[command]  # type: ignore[attr-defined]
    return {p.name: p for p in cmd.params}


def test_max_steps_default_is_the_same() -> None:
    from openenv_rollouts.collect import collect_async

    run_default = _options("run")["max_steps"].default  # type: ignore[attr-defined]
    collect_default = _options("collect")["max_steps"].default  # type: ignore[attr-defined]
    assert run_default == collect_default == DEFAULT_MAX_STEPS
    assert inspect.signature(collect_async).parameters["max_steps"].default == DEFAULT_MAX_STEPS


def test_every_run_policy_is_a_collect_policy() -> None:
    from openenv.cli.run_cmd import run
    from openenv_rollouts.envinfo import EnvInfo
    from openenv_rollouts.policies import BUILTIN_POLICIES, make_policy

    run_choices = {p.value for p in typing.get_type_hints(run, include_extras=True)["policy"].__origin__}
    assert run_choices == set(SCHEMA_POLICIES) and run_choices <= set(BUILTIN_POLICIES)
    info = EnvInfo(schema={"action": {"type": "object", "properties": {"n": {"type": "integer"}}}})
    for name in SCHEMA_POLICIES:
        assert make_policy(name, info).name == name


def test_the_collect_bar_labels_its_numbers() -> None:
    from rich.console import Console
    from rich.progress import Progress

    from openenv_rollouts.cli import progress_columns

    out = io.StringIO()
    progress = Progress(*progress_columns(), auto_refresh=False)
    task = progress.add_task("grid_world: episodes", total=10, errors=0)
    progress.update(task, advance=3)
    Console(file=out, width=200).print(progress.make_tasks_table(progress.tasks))
    text = out.getvalue()
    assert "3/10" in text and "episodes/s" in text and "elapsed" in text and "ETA" in text
