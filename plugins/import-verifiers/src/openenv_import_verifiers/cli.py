"""``openenv import verifiers:<module>|ors:PATH_OR_MODULE [-o DIR] [--name NAME] [--force]``."""

from __future__ import annotations

from pathlib import Path

import typer

from openenv.cli.output import EXIT_USAGE, console, fail

__all__ = ["import_cmd"]


def import_cmd(
    source: str = typer.Argument(..., help="verifiers:<module> (a verifiers taskset module) or "
                                 "ors:PATH_OR_MODULE[:Class] (an ORS env's .py file, package folder or module)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="Folder to write the package to "
                                       "(default: ./<name>)"),
    name: str | None = typer.Option(None, "--name", help="The env's name (default: the module's)"),
    force: bool = typer.Option(False, "--force", help="Replace the output folder if it exists"),
    limit: int = typer.Option(100_000, "--limit", min=1, help="Import at most this many tasks"),
    reward_range: str = typer.Option("0,1", "--reward-range", help="ors: the bounds of the env's rewards, "
                                     "LOW,HIGH (ORS declares none; scores in [0, 1] by default)"),
    test_fraction: float = typer.Option(0.2, "--test-fraction", help="verifiers: share of rows (the last "
                                        "ones) in the 'test' split, for rows that name no split"),
    arg: list[str] = typer.Option([], "--arg", help="verifiers: KEY=VALUE for the module's load_environment() "
                                  "(verifiers' old API; a value that reads as JSON is that value), repeatable"),
) -> None:
    """Generate an env package that serves a verifiers taskset or an ORS environment over the OpenEnv protocol.

    verifiers: each task of the taskset becomes a task of the env (train/test splits); an episode is
    one reply, scored by the task's own verifiers rewards. A module with load_environment() (verifiers'
    old API, needs verifiers 0.1) imports its single-turn env's dataset rows, scored by its rubric.
    ors: the ORS env's splits and tasks are the env's, its tools the action space, a tool's ORS reward
    the step's reward. Install the package (`pip install -e DIR`) and serve it with `openenv serve NAME`.
    """
    from openenv.errors import ConfigError

    kind, _, rest = source.partition(":")
    try:
        if kind == "ors":
            from openenv_import_verifiers.ors_generate import generate_ors

            imported = generate_ors(rest, output, name=name, force=force, limit=limit,
                                    reward_range=_range(reward_range))
        else:
            from openenv_import_verifiers.generate import generate
            from openenv_import_verifiers.legacy import parse_args

            default = name or rest.replace(".", "_").lower() or "imported"
            imported = generate(source, output or Path(default), name=name, force=force, limit=limit,
                                test_fraction=test_fraction, args=parse_args(arg))
    except ConfigError as exc:  # VerifiersImportError, OrsImportError: one line that names the fix
        fail(str(exc), EXIT_USAGE)
    splits = ", ".join(f"{k} {v}" for k, v in imported.splits.items())
    console().print(f"wrote {imported.path} (env {imported.name}: {splits}); next: "
                    f"pip install -e {imported.path} && openenv serve {imported.name}")


def _range(text: str) -> tuple[float, float]:
    from openenv_import_verifiers.ors_source import OrsImportError

    low, sep, high = text.partition(",")
    try:
        if not sep:
            raise ValueError(text)
        return float(low), float(high)
    except ValueError:
        raise OrsImportError(f"--reward-range {text!r} is not LOW,HIGH: give two numbers, "
                             "e.g. --reward-range 0,1") from None
