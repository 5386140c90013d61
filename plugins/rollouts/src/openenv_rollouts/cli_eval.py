"""``openenv eval``: ``run`` (the default: ``openenv eval ENV --split test -k 4``) and ``compare``.

Exit codes as ``collect``: 0 done within the error budget, 1 budget spent or the env could not be
started, 2 usage errors (unknown env/provider/policy/split, an env without tasks, mismatched runs,
an existing run without ``--resume``), 130 on Ctrl-C (``--resume`` continues it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table
from openenv_rollouts.cli import PROVIDER_OPTION_HELP

__all__ = ["app"]


class _RunByDefault(TyperGroup):
    """``openenv eval ENV ...`` means ``openenv eval run ENV ...``: a first argument that is not a
    subcommand (nor an option) is an env name."""

    # ctx is typer's vendored click Context, whose module path is private: typed loosely on purpose
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(cls=_RunByDefault, no_args_is_help=True,
                  help="Evaluate a policy on every task of a split (pass@k, per-task results, report), "
                       "or compare two evals. `openenv eval ENV ...` is `openenv eval run ENV ...`.")


def _print_result(doc: dict[str, Any], out_dir: Path) -> None:
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:.4g}"

    t = table("Tasks", "Episodes", "Errors", "Mean reward", "Success rate",
              *[f"pass@{k}" for k in doc["pass_at_k"]],
              title=f"{doc['env']} / {doc['split']} ({doc['policy']}, success: reward >= {doc['threshold']:g})")
    t.add_row(str(len(doc["tasks"])), str(doc["episodes"]), str(doc["errors"]), fmt(doc["mean_reward"]),
              fmt(doc["success_rate"]), *[fmt(v) for v in doc["pass_at_k"].values()])
    out = console()
    out.print(t)
    if doc["component_means"]:
        c = table("Component", "Mean per episode", title="reward components")
        for name, value in doc["component_means"].items():
            c.add_row(name, fmt(value))
        out.print(c)
    run = doc.get("run") or {}
    if run.get("skipped"):
        out.print(f"resumed: {run['skipped']} (task, sample) pairs were already played")
    out.print(f"results: {out_dir / 'eval.json'}, {out_dir / 'tasks.csv'}, {out_dir / 'index.html'}")


@app.command("run")
def run_cmd(
    env: Annotated[str, typer.Argument(help="Registered env name (or 'module:Class').")],
    split: Annotated[str, typer.Option(help="The split to evaluate on.")] = "test",
    k: Annotated[int, typer.Option("-k", min=1, help="Samples per task (pass@k for every k up to it).")] = 1,
    policy: Annotated[str, typer.Option(help="random, first, llm, or module:callable.")] = "random",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Run directory (default "
                                                "runs/eval-ENV-SPLIT).")] = None,
    threshold: Annotated[float, typer.Option(help="An episode succeeds when its reward is at least this.")] = 1.0,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Concurrent sessions.")] = 4,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the policy's random draws per (task, sample).")] = 0,
    provider: Annotated[str | None, typer.Option("--provider", "-p", help="Provider (default: local).")] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Servers the provider starts; sessions "
                                          "are spread over them (openenv.EnvPool).")] = 1,
    provider_option: Annotated[list[str] | None, typer.Option("--provider-option", "-O",
                                                              help=PROVIDER_OPTION_HELP)] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Use an already-served env instead.")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token of --base-url.")] = None,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Step limit per episode.")] = 100,
    retries: Annotated[int, typer.Option(min=0, help="Retries of an episode the env failed.")] = 1,
    max_errors: Annotated[int | None, typer.Option("--max-errors", min=0, help="Error budget: failed "
                                                   "episodes allowed (default 10%).")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in OUTPUT: finished (task, sample) "
                                         "pairs are not played again.")] = False,
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
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report and its charts.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print eval.json only.")] = False,
) -> None:
    """Play every task of SPLIT K times and report mean reward, success rate, pass@k, per-task results."""
    from openenv.errors import ConfigError, PluginError, UnknownNameError
    from openenv_rollouts.cli import progress_hooks, provider_options
    from openenv_rollouts.eval import ROLLOUTS, evaluate_async

    out_dir = output or Path("runs") / f"eval-{env.replace(':', '_')}-{split}"
    rollouts = out_dir / ROLLOUTS
    if resume and not rollouts.exists():
        resume = False
    if not resume and rollouts.exists() and rollouts.stat().st_size:
        fail(f"{out_dir} holds a run already; pass --resume to continue it, or choose another --output.",
             EXIT_USAGE)
    llm = ({"base_url": llm_base_url, "model": llm_model, "api_key": llm_api_key, "logprobs": llm_logprobs}
           if policy == "llm" else None)
    options = provider_options(provider_option)
    hooks = progress_hooks(f"{env}/{split}: episodes", quiet or as_json)
    try:
        result = asyncio.run(evaluate_async(
            env, split=split, k=k, out_dir=out_dir, policy=policy, threshold=threshold, seed=seed,
            concurrency=concurrency, provider=provider, base_url=base_url, token=token, max_steps=max_steps,
            retries=retries, max_errors=max_errors, resume=resume, transport=transport, llm=llm,
            on_episode=hooks.on_episode, on_start=hooks.on_start, report=not no_report, replicas=replicas,
            provider_options=options, checkpoint_every=checkpoint_every))
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished episodes are in {rollouts}; continue with --resume", err=True)
        raise typer.Exit(130) from None
    except (UnknownNameError, ConfigError) as exc:
        fail(str(exc), EXIT_USAGE)
    except (PluginError, RuntimeError, TimeoutError, OSError) as exc:
        fail(f"could not evaluate env '{env}': {exc}", EXIT_ERROR)
    finally:
        hooks.stop()
    doc = result.to_json()
    if as_json:
        print_json(doc)
    else:
        _print_result(doc, out_dir)
    if result.run.budget_spent:
        typer.echo(f"error: error budget spent: {result.run.errors} of {result.run.episodes} episodes failed "
                   f"(budget {result.run.max_errors}); {result.run.not_started} episodes not started; "
                   f"continue with --resume", err=True)
        raise typer.Exit(EXIT_ERROR)


@app.command("compare")
def compare_cmd(
    run_a: Annotated[Path, typer.Argument(help="The baseline run (an `openenv eval` output directory).")],
    run_b: Annotated[Path, typer.Argument(help="The run compared with it.")],
    resamples: Annotated[int, typer.Option(min=100, help="Bootstrap resamples.")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999, help="Interval coverage.")] = 0.95,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Paired comparison of two evals over their shared tasks: B minus A with bootstrap intervals,
    and the tasks that flipped (solved in one run, not the other)."""
    from openenv.errors import ConfigError
    from openenv_rollouts.eval import load_run
    from openenv_rollouts.evalreport import compare_runs

    try:
        cmp = compare_runs(load_run(run_a), load_run(run_b), names=(str(run_a), str(run_b)),
                           resamples=resamples, seed=seed, confidence=confidence)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        print_json(cmp.to_json())
        return
    out = console()
    pct = f"{cmp.confidence:.0%}"
    t = table("Metric", "A", "B", "B - A", f"{pct} interval", "",
              title=f"{cmp.env} / {cmp.split}: B = {run_b} vs A = {run_a}, {cmp.shared} shared tasks")
    for m in cmp.metrics:
        verdict = "B better" if m.low > 0 else "B worse" if m.high < 0 else "no clear difference"
        t.add_row(m.name, f"{m.a:.4g}", f"{m.b:.4g}", f"{m.diff:+.4g}", f"[{m.low:+.4g}, {m.high:+.4g}]", verdict)
    out.print(t)
    if cmp.only_a or cmp.only_b:
        out.print(f"not paired: {cmp.only_a} tasks only in A, {cmp.only_b} only in B")
    out.print(f"solved in B, not in A ({len(cmp.gained)}): {', '.join(cmp.gained) or '-'}")
    out.print(f"solved in A, not in B ({len(cmp.lost)}): {', '.join(cmp.lost) or '-'}")
