"""``openenv collect ENV``: collect rollouts into JSONL (and Parquet), print a summary, draw a report.

Exit codes: 0 when the run finished within its error budget, 1 when the budget was spent (or the
env could not be started), 2 for usage errors (unknown env/provider/policy, bad task file), 130 on
Ctrl-C. Everything written before the end stays valid JSONL in every case.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table
from openenv.cli.run_cmd import DEFAULT_MAX_STEPS

__all__ = ["Progress", "collect_cmd", "progress_columns", "progress_hooks"]


class Progress:
    """A progress bar on stderr fed by a run's ``on_start``/``on_episode`` (shared by collect and eval)."""

    def __init__(self, label: str, hidden: bool) -> None:
        self.label, self.hidden = label, hidden
        self.bar: Any = None
        self.task: Any = None
        self.errors = 0

    def on_start(self, total: int) -> None:
        if self.hidden:
            return
        from rich.progress import Progress as Bar

        self.bar = Bar(*progress_columns(), console=console(stderr=True), transient=True)
        self.bar.start()
        self.task = self.bar.add_task(self.label, total=total, errors=0)

    def on_episode(self, record: Any) -> None:
        self.errors += record.status != "ok"
        if self.bar is not None:
            self.bar.update(self.task, advance=1, errors=self.errors)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def progress_hooks(label: str, hidden: bool) -> Progress:
    return Progress(label, hidden)


def _print_summary(summary: Any) -> None:
    t = table("Episodes", "OK", "Errors", "Steps", "Mean reward", "Std reward", "Episodes/s", "Steps/s",
              title=f"{summary.env} via {summary.provider or summary.output} ({summary.policy})")

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.4g}"

    t.add_row(str(summary.episodes), str(summary.ok), str(summary.errors), str(summary.steps),
              fmt(summary.mean_reward), fmt(summary.std_reward), f"{summary.episodes_per_s:.2f}",
              f"{summary.steps_per_s:.1f}")
    out = console()
    out.print(t)
    if summary.component_means:
        c = table("Component", "Mean per episode", title="reward components")
        for name, value in summary.component_means.items():
            c.add_row(name, f"{value:.4g}")
        out.print(c)
    if summary.error_kinds:
        out.print("errors by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.error_kinds.items())))
    if summary.skipped:
        out.print(f"resumed: {summary.skipped} episodes were already in {summary.output}")
    if summary.restarts:
        out.print(f"the env server was restarted {summary.restarts} time(s)")


#: ``--provider-option KEY=VALUE``'s help (shared by collect and eval).
PROVIDER_OPTION_HELP = ("A provider option KEY=VALUE for every server it starts (repeatable; VALUE is read "
                        "as JSON when it parses, else as text), e.g. cpus=0.25 or image=my-env:1.")


def provider_options(items: list[str] | None) -> dict[str, Any]:
    """``--provider-option KEY=VALUE`` items → the launch options (a usage error names a bad item)."""
    import json

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--provider-option takes KEY=VALUE (e.g. cpus=0.25), got {item!r}.", EXIT_USAGE)
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out[key.strip()] = value
    return out


def _task_weights(path: Path) -> dict[str, float]:
    """``--task-weights FILE``: a JSON object of non-negative weights by task id."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"--task-weights {path}: {exc}", EXIT_USAGE)
    bad = (not isinstance(data, dict) or not data
           or any(not isinstance(v, int | float) or isinstance(v, bool) or v < 0 for v in data.values()))
    if bad:
        fail(f"--task-weights {path}: expected a JSON object of task id -> non-negative number, "
             'e.g. {"train-0": 2, "train-1": 1}.', EXIT_USAGE)
    return {str(k): float(v) for k, v in data.items()}


def progress_columns() -> list[Any]:
    """The collect bar: episodes done of total, errors, the rate, the time so far and the ETA, each
    labelled (a bare "0:01:23" reads as anything)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("… episodes/s" if speed is None else f"{speed:.2f} episodes/s")

    return [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("errors {task.fields[errors]}"), RateColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
            TextColumn("ETA"), TimeRemainingColumn()]


def collect_cmd(
    env: Annotated[str, typer.Argument(help="Registered env name (or 'module:Class').")],
    episodes: Annotated[int, typer.Option("--episodes", "-n", min=1, help="Episodes to collect.")] = 10,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Concurrent sessions.")] = 4,
    output: Annotated[Path, typer.Option("--output", "-o", help="JSONL file to write.")] = Path("rollouts.jsonl"),
    parquet: Annotated[Path | None, typer.Option(help="Also write this Parquet file.")] = None,
    report: Annotated[Path | None, typer.Option(help="Write PNG charts and index.html here.")] = None,
    policy: Annotated[str, typer.Option(help="random, first, cycle (as `openenv run`), llm, or "
                                        "module:callable.")] = "random",
    provider: Annotated[str | None, typer.Option("--provider", "-p", help="Provider (default: local).")] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Servers the provider starts; sessions "
                                          "are spread over them (openenv.EnvPool).")] = 1,
    metrics_port: Annotated[int | None, typer.Option("--metrics-port", min=1, max=65535, help="With --replicas: "
                                                     "serve the pool's Prometheus metrics at "
                                                     "http://127.0.0.1:PORT/metrics (bearer OPENENV_TOKEN if "
                                                     "set).")] = None,
    provider_option: Annotated[list[str] | None, typer.Option("--provider-option", "-O",
                                                              help=PROVIDER_OPTION_HELP)] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Use an already-served env instead.")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token of --base-url.")] = None,
    seed: Annotated[int | None, typer.Option(min=0, help="Episode i resets with seed + i.")] = None,
    tasks: Annotated[Path | None, typer.Option(help="JSONL of reset keywords, one row per episode "
                                                    "(cycled).")] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Step limit per episode (as `openenv run`).")
                         ] = DEFAULT_MAX_STEPS,
    retries: Annotated[int, typer.Option(min=0, help="Retries of an episode the env failed.")] = 1,
    max_errors: Annotated[int | None, typer.Option("--max-errors", min=0, help="Error budget: failed "
                                                   "episodes allowed (default 10%).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Append to OUTPUT, skipping episodes in it.")] = False,
    checkpoint_every: Annotated[int, typer.Option("--checkpoint-every", min=0, help="Snapshot each episode every N "
                                                  "steps: a retry or --resume continues it from there (envs "
                                                  "with snapshots; 0: off).")] = 0,
    transport: Annotated[str | None, typer.Option(help="Client transport (default ws).")] = None,
    llm_base_url: Annotated[str | None, typer.Option("--llm-base-url", help="OpenAI-compatible URL "
                                                     "(…/v1) for --policy llm.")] = None,
    llm_model: Annotated[str | None, typer.Option("--llm-model", help="Model name for --policy llm.")] = None,
    llm_api_key: Annotated[str | None, typer.Option("--llm-api-key", envvar="OPENAI_API_KEY",
                                                    help="API key (or OPENAI_API_KEY).")] = None,
    llm_logprobs: Annotated[bool, typer.Option("--llm-logprobs", help="Ask the endpoint for token logprobs "
                                               "(recorded per step).")] = False,
    group_size: Annotated[int, typer.Option("--group-size", "-g", min=1, help="Episodes per group: the "
                                            "members of a group play the same task and seed.")] = 1,
    split: Annotated[str | None, typer.Option(help="Play tasks of this server split (drawn by --sampler) "
                                              "instead of --tasks rows.")] = None,
    sampler: Annotated[str, typer.Option(help="How --split tasks are drawn: uniform, weighted (with "
                                         "--task-weights), signal.")] = "uniform",
    task_weights: Annotated[Path | None, typer.Option("--task-weights", help="JSON object {task_id: weight} "
                                                      "for --sampler weighted.")] = None,
    threshold: Annotated[float, typer.Option(help="An episode succeeds (for --sampler signal and the "
                                             "report) when its reward is at least this.")] = 1.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON only.")] = False,
) -> None:
    """Collect EPISODES rollouts of ENV over CONCURRENCY sessions into a dataset."""
    from openenv.errors import ConfigError, PluginError, UnknownNameError
    from openenv_rollouts.collect import collect_async, load_tasks
    from openenv_rollouts.export import to_parquet

    if resume and not output.exists():
        resume = False
    if not resume and output.exists() and output.stat().st_size:
        fail(f"{output} exists; pass --resume to continue it, or choose another --output.", EXIT_USAGE)
    rows = None
    if tasks is not None and split is not None:
        fail("give --tasks FILE (reset keywords) or --split NAME (the server's tasks), not both.", EXIT_USAGE)
    if tasks is not None:
        try:
            rows = load_tasks(tasks)
        except (OSError, ValueError) as exc:
            fail(str(exc), EXIT_USAGE)
    weights = _task_weights(task_weights) if task_weights is not None else None
    if weights is not None and sampler != "weighted":
        fail(f"--task-weights is for --sampler weighted (got --sampler {sampler}).", EXIT_USAGE)
    llm = ({"base_url": llm_base_url, "model": llm_model, "api_key": llm_api_key, "logprobs": llm_logprobs}
           if policy == "llm" else None)
    options = provider_options(provider_option)
    hooks = progress_hooks(f"{env}: episodes", quiet or as_json)

    try:
        summary = asyncio.run(collect_async(
            env, episodes=episodes, concurrency=concurrency, output=output, policy=policy, provider=provider,
            base_url=base_url, token=token, seed=seed, tasks=rows, max_steps=max_steps, retries=retries,
            max_errors=max_errors, resume=resume, transport=transport, llm=llm, on_episode=hooks.on_episode,
            on_start=hooks.on_start, group_size=group_size, split=split, sampler=sampler, sampler_weights=weights,
            threshold=threshold, replicas=replicas, provider_options=options,
            checkpoint_every=checkpoint_every, metrics_port=metrics_port))
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished episodes are in {output}; continue with --resume", err=True)
        raise typer.Exit(130) from None
    except (UnknownNameError, ConfigError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (PluginError, RuntimeError, TimeoutError, OSError) as exc:
        fail(f"could not collect from env '{env}': {exc}", EXIT_ERROR)
    finally:
        hooks.stop()
    if parquet is not None:
        to_parquet(output, parquet)
    if report is not None:
        from openenv_rollouts.report import run_meta, write_report

        meta = run_meta(env=env, policy=summary.policy, seed=seed, provider=base_url or summary.provider,
                        episodes=episodes, max_steps=max_steps, split=split, sampler=sampler if split else None,
                        tasks=str(tasks) if tasks else None, success_threshold=threshold)
        page = write_report(output, report, meta=meta, threshold=threshold, data={"Parquet": parquet})
        if not as_json:
            console().print(f"report: {page}")
    if as_json:
        print_json(summary.to_json())
    else:
        _print_summary(summary)
    if summary.budget_spent:
        typer.echo(f"error: error budget spent: {summary.errors} of {summary.episodes} episodes failed "
                   f"(budget {summary.max_errors}); {summary.not_started} episodes not started; "
                   f"{summary.episodes} records are in {output}", err=True)
        raise typer.Exit(EXIT_ERROR)
