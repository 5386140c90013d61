"""``openenv validate NAME|PATH|URL``: check an environment statically and by running it.

* ``NAME`` – a registered env (``openenv envs list``); its registered ``openenv.yaml`` is read.
* ``PATH`` – an env package folder (``openenv.yaml`` at its root, or under ``src/<pkg>/``) or the
  manifest file itself; the env is the manifest's ``env:`` reference, else the installed env of
  the manifest's ``name``.
* ``module:Class`` – an env class (no manifest: the manifest checks fail, naming the fix).
* ``URL`` (``http://``, ``https://``, ``ws://``) – only the wire-level checks, against that server.
* ``NAME:ARG`` of a registered env whose class defines ``validate_spec(arg) -> Report`` (e.g.
  ``harbor:./tasks``): that env's own checks of what ARG names (one row per task of a suite).

Static checks: manifest (every field, with line numbers), entry point (an ``Environment``
subclass), declared types, schemas, declared reward range, tools (declared ones exist; no reserved
names). Runtime checks, in-process: random episodes, rewards inside the range, the oracle
(``oracle:``) beats random by ``oracle_margin``, seeded determinism, ``state.step_count``, time
budgets; then the env is served on 127.0.0.1 and the wire checks run against it (health, schema,
an episode, seeded reset, steps before reset and after done, two independent sessions) and
``close`` is checked to be called on every env the server made. A step out of order passes when
it is refused with a structured error, or accepted with a well-formed result that does not un-end
a finished episode (docs/manifest.md, "Steps out of order").

Output: a table, or ``--json`` (schema ``openenv.validate/1``: ``{"target", "ok", "checks": [{"name",
"status": "pass"|"fail"|"n/a", "detail", "fix"}]}``). A check that cannot apply says why ("n/a").
Exit code 0 when no check fails, 1 when one does, 2 when the target itself cannot be found.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table

if TYPE_CHECKING:
    from openenv.cli._validate_core import Check, Report, Target

__all__ = ["Check", "Report", "register", "resolve_target", "validate", "validate_target"]


def __getattr__(name: str) -> object:
    """``Check`` and ``Report`` (for an env's ``validate_spec``), imported on first use: the CLI's
    start-up does not pay for the validation machinery."""
    if name in ("Check", "Report"):
        from openenv.cli import _validate_core

        return getattr(_validate_core, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _is_url(arg: str) -> bool:
    return arg.startswith(("http://", "https://", "ws://", "wss://"))


def _find_manifest(path: Path) -> Path | None:
    from openenv.manifest import MANIFEST_FILENAME

    if path.is_file():
        return path
    if (path / MANIFEST_FILENAME).is_file():
        return path / MANIFEST_FILENAME
    found = sorted((path / "src").glob(f"*/{MANIFEST_FILENAME}")) if (path / "src").is_dir() else []
    return found[0] if found else None


def resolve_target(arg: str) -> Target:
    """Find the env reference and manifest behind ``arg``; ``fail`` (exit 2) when there is none."""
    from openenv.cli._validate_core import Target
    from openenv.errors import UnknownNameError
    from openenv.manifest import ManifestError, load_manifest, locate_manifest
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    if "/" in arg or arg.endswith((".yaml", ".yml")) or arg in (".", ".."):
        path = Path(arg)
        if not path.exists():
            fail(f"{arg}: no such file or folder. Pass an env name, an env package folder, "
                 "'module:Class' or a server URL.", EXIT_USAGE)
        manifest_path = _find_manifest(path)
        if manifest_path is None:
            fail(f"no openenv.yaml in {path} (looked at its root and src/*/). Create one (see "
                 "docs/manifest.md) or run `openenv init`.", EXIT_USAGE)
        target = Target(label=arg, manifest_path=manifest_path.resolve())
        try:
            manifest = load_manifest(manifest_path)
        except ManifestError:
            return target  # the manifest check reports it
        target.ref = manifest.env
        if target.ref is None and manifest.name in pm.catalog.envs.names():
            target.ref = pm.catalog.envs.get(manifest.name).ref_text
        return target
    if ":" in arg:
        from openenv.cli.serve_cmd import cwd_importable

        cwd_importable()  # `validate mymodule:GuessEnv` finds what `serve`/`run` of it find
        return Target(label=arg, ref=arg)
    try:
        entry = pm.catalog.envs.get(arg)
    except UnknownNameError as exc:
        fail(str(exc), EXIT_USAGE)
    target = Target(label=arg, ref=entry.ref_text)
    raw = getattr(entry, "manifest", None) or entry.extra.get("manifest")
    if raw is not None:
        from openenv.cli.envs_cmd import _plugin_folder

        try:
            target.manifest_path = locate_manifest(raw, relative_to=_plugin_folder(pm, entry.plugin))
        except ManifestError as exc:
            target.manifest_error = str(exc)
    return target


def validate_target(arg: str, *, episodes: int = 3) -> Report:
    """Run every check on ``arg`` and return the report (``fail``s only when ``arg`` names nothing)."""
    from openenv.cli._validate_core import Report, static_checks
    from openenv.cli._validate_runtime import runtime_checks
    from openenv.cli._validate_wire import served_checks, wire_checks

    report = Report(target=arg)
    spec_validator = None if _is_url(arg) else _spec_validator(arg)
    if spec_validator is not None:
        from openenv.errors import ConfigError

        try:
            return spec_validator(arg.partition(":")[2])
        except ConfigError as exc:  # ARG names nothing the env can validate (no such folder, no tasks)
            fail(str(exc), EXIT_USAGE)
    if _is_url(arg):
        url = "http://" + arg.split("://", 1)[1] if arg.startswith("ws://") else arg
        url = "https://" + arg.split("://", 1)[1] if arg.startswith("wss://") else url
        wire_checks(report, url, reward_range=None)
        return report
    target = resolve_target(arg)
    static_checks(report, target)
    runtime_checks(report, target, episodes=episodes)
    if target.env is None:
        report.run("served", lambda: _not_applicable("the entry point did not load (see entry_point)"))
        return report
    manifest = target.manifest
    served_checks(report, target.env, reward_range=manifest.reward_range if manifest else None,
                  max_steps=min(manifest.max_episode_steps if manifest else 200, 200),
                  volatile=frozenset(manifest.volatile_fields if manifest else ()))
    return report


def _spec_validator(arg: str) -> Callable[[str], Report] | None:
    """``validate_spec`` of the registered env NAME of a ``NAME:ARG`` spec (``harbor:./tasks``), if it has one.

    Such an env validates what ARG names its own way (a task suite: every task's oracle and a no-op
    agent) and returns the report; any other ``NAME:ARG`` stays a ``module:Class`` reference."""
    from openenv.plugins import get_plugin_manager

    scheme, colon, rest = arg.partition(":")
    pm = get_plugin_manager()
    if not colon or not rest or scheme not in pm.catalog.envs:
        return None
    hook = getattr(pm.catalog.envs.get(scheme).load(), "validate_spec", None)
    return hook if callable(hook) else None


def _not_applicable(reason: str) -> str:
    from openenv.cli._validate_core import NotApplicable

    raise NotApplicable(reason)


def validate(
    target: Annotated[str, typer.Argument(help="Env name, env package folder, 'module:Class', or server URL.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (openenv.validate/1).")] = False,
    episodes: Annotated[int, typer.Option(help="Random (and oracle) episodes to play.", min=1, max=100)] = 3,
) -> None:
    """Check an environment: manifest, entry point, types, and runtime behaviour (it runs the env)."""
    report = validate_target(target, episodes=episodes)
    if as_json:
        print_json(report.to_json())
    else:
        from rich.markup import escape

        marks = {"pass": "[green]pass[/green]", "fail": "[red]FAIL[/red]", "n/a": "[yellow]n/a[/yellow]"}
        t = table("Check", "Result", "Detail", "Fix", title=f"openenv validate {target}",
                  identifiers=("Check", "Result"))
        for check in report.checks:
            t.add_row(check.name, marks[check.status], escape(check.detail), escape(check.fix))
        out = console()
        out.print(t)
        failed = [c.name for c in report.checks if c.status == "fail"]
        out.print("[green]all checks passed[/green]" if not failed
                  else f"[red]{len(failed)} check(s) failed: {', '.join(failed)}[/red]")
    if not report.ok:
        raise typer.Exit(EXIT_ERROR)


def register(app: typer.Typer) -> None:
    """Add ``openenv validate`` to ``app``."""
    app.command("validate", no_args_is_help=True)(validate)
