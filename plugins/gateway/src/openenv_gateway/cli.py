"""``openenv agent-eval ENV --split test --model-url URL``: a black-box agent program on every task
of a split, its model calls captured by the gateway, each episode graded by the env.

It starts the env (``--provider``, default local; or uses ``--base-url``), a ``CaptureGateway`` in
front of ``--model-url`` (any OpenAI-compatible server that returns token ids: vLLM, the test
model server), and plays ``--agent`` (default: ``python -m openenv_gateway.agents.simple``) under
``CommandHarness`` on each task; it writes ``rollouts.jsonl`` (``openenv.rollout/3`` records with
samples) and ``samples.parquet`` to ``--output``. Exit codes: 0 done, 1 the env, gateway or every
episode failed, 2 bad usage (unknown env or split, a malformed option).
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table

__all__ = ["agent_eval_cmd"]


def _extra(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        fail(f"--action-extra must be a JSON object, e.g. '{{\"submit\": true}}': {exc}", EXIT_USAGE)
    if not isinstance(value, dict):
        fail(f"--action-extra must be a JSON object, e.g. '{{\"submit\": true}}', got {raw!r}", EXIT_USAGE)
    return value


def _preset(words: list[str], answer_file: str) -> list[str]:
    """``mini-swe-agent [options]`` as its launcher's argv (told to leave its answer in ``answer_file``)."""
    from openenv_gateway.agents.miniswe import preset_command

    command = preset_command(words)
    if command is None:
        return words
    import importlib.util

    if importlib.util.find_spec("minisweagent") is None:
        fail("--agent mini-swe-agent needs mini-swe-agent: pip install 'openenvkit-gateway[miniswe]'", EXIT_USAGE)
    if answer_file and "--answer-file" not in words:
        command += ["--answer-file", answer_file]
    return command


def agent_eval_cmd(
    env: Annotated[str, typer.Argument(help="Env name (as registered), e.g. coding.")],
    model_url: Annotated[str, typer.Option("--model-url", help="OpenAI-compatible inference server (its root, "
                                           "or …/v1) that returns token ids, e.g. vLLM.")],
    split: Annotated[str, typer.Option(help="The split whose tasks are played.")] = "test",
    agent: Annotated[str | None, typer.Option(help="The agent command line (shell words); default: "
                                              "python -m openenv_gateway.agents.simple; 'mini-swe-agent [options]' "
                                              "runs mini-swe-agent (extra [miniswe]).")] = None,
    k: Annotated[int, typer.Option("-k", min=1, help="Episodes per task (one group per task).")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks of the split.")] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Run directory (default "
                                                "runs/agent-eval-ENV-SPLIT).")] = None,
    model: Annotated[str | None, typer.Option(help="Model name sent upstream (replaces the agent's).")] = None,
    answer_file: Annotated[str, typer.Option("--answer-file", help="The file the agent leaves its answer in "
                                             "(else its stdout is the answer).")] = "solution.py",
    action_field: Annotated[str, typer.Option("--action-field", help="The env action field the answer "
                                              "goes in.")] = "code",
    action_extra: Annotated[str | None, typer.Option("--action-extra", help="JSON object added to the action "
                                                     "(default for coding: {\"submit\": true}).")] = None,
    deadline_s: Annotated[float, typer.Option("--deadline-s", min=1.0, help="Wall-clock limit of each episode "
                                              "(env reset, agent, grading).")] = 600.0,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Episodes at once.")] = 1,
    network: Annotated[str, typer.Option(help="host, or gateway-only (bubblewrap: the gateway is the "
                                         "agent's only address).")] = "host",
    threshold: Annotated[float, typer.Option(help="An episode succeeds when its reward is at least "
                                             "this.")] = 1.0,
    provider: Annotated[str | None, typer.Option("--provider", "-p", help="Provider (default: local).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Use an already-served env instead.")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token of --base-url.")] = None,
    runtime: Annotated[str, typer.Option("--runtime", help="process (the agent a subprocess here), or docker: "
                                         "the agent in a container of --image with no network but the gateway "
                                         "(read-only root, no capabilities; docs/gateway.md).")] = "process",
    image: Annotated[str | None, typer.Option("--image", help="The agent's image for --runtime docker (needs "
                                              "python3 and the agent program).")] = None,
    tools: Annotated[str, typer.Option("--tools", help="none, or act: the env's action as the agent's tool "
                                       "`act` (MCP at OPENENV_MCP_URL, the openenv-tool command, JSON-RPC), for "
                                       "agents that act in the env (with --action-field '' the closing action "
                                       "is --action-extra alone).")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON only.")] = False,
) -> None:
    """Evaluate a black-box agent program on a split of an env's tasks through the capture gateway."""
    from openenv.errors import ConfigError, PluginError, UnknownNameError, ValidationError
    from openenv_gateway.evaluate import evaluate_split
    from openenv_gateway.gateway import CaptureGateway
    from openenv_gateway.harness import CommandHarness

    if network not in ("host", "gateway-only"):
        fail(f"--network must be host or gateway-only, got {network!r}", EXIT_USAGE)
    if tools not in ("none", "act"):
        fail(f"--tools must be none or act, got {tools!r}", EXIT_USAGE)
    if runtime not in ("process", "docker"):
        fail(f"--runtime must be process or docker, got {runtime!r}", EXIT_USAGE)
    if runtime == "docker" and not image:
        fail("--runtime docker runs the agent in a container: add --image IMAGE (with python3 and the agent)",
             EXIT_USAGE)
    command = shlex.split(agent) if agent else [sys.executable, "-m", "openenv_gateway.agents.simple"]
    if not command:
        fail("--agent is empty: give the agent's command line, e.g. --agent 'python agent.py'", EXIT_USAGE)
    command = _preset(command, answer_file)
    extra = _extra(action_extra) if action_extra is not None else ({"submit": True} if env == "coding" else {})
    out_dir = output or Path("runs") / f"agent-eval-{env.replace(':', '_')}-{split}"
    upstream = model_url.rstrip("/").removesuffix("/v1")
    handle = None
    if base_url is None:
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        try:
            pm = get_plugin_manager()
            provider_obj = pm.catalog.providers.load(pm.choose_provider(env, provider))()
            token = secrets.token_urlsafe(24)
            started = provider_obj.start(LaunchSpec(env=env, max_sessions=max(8, concurrency * 2), token=token))
        except (UnknownNameError, ConfigError) as exc:
            fail(str(exc), EXIT_USAGE)
        except (PluginError, RuntimeError, TimeoutError, OSError) as exc:
            fail(f"could not start env '{env}': {exc}", EXIT_ERROR)
        handle, base_url = started, started.base_url
    gateway = CaptureGateway(upstream, model=model)
    try:
        gateway.start()
        harness = CommandHarness(gateway, command, deadline_s=deadline_s, grade_reserve_s=min(30.0, deadline_s / 4),
                                 model=model or "openenv", network=network,  # type: ignore[arg-type]
                                 runtime=runtime, image=image)  # type: ignore[arg-type]
        result = evaluate_split(base_url, env=env, split=split, harness=harness, out_dir=out_dir, token=token, k=k,
                                limit=limit, answer_file=answer_file or None, action_field=action_field,
                                action_extra=extra, concurrency=concurrency, threshold=threshold, tools=tools)
    except (ValidationError, ValueError) as exc:
        fail(f"agent-eval {env} --split {split}: {exc}", EXIT_USAGE)
    except (OSError, RuntimeError, TimeoutError) as exc:
        fail(f"agent-eval {env}: {exc}", EXIT_ERROR)
    finally:
        gateway.stop()
        if handle is not None:
            handle.stop()
    doc = result.summary()
    if as_json:
        print_json(doc)
    else:
        t = table("Task", "Mean reward", identifiers=("Task",),
                  title=f"{env} / {split}: {doc['episodes']} episodes")
        for task_id, reward in doc["per_task"].items():
            t.add_row(task_id, f"{reward:.3f}")
        out = console()
        out.print(t)
        out.print(f"agent: {shlex.join(command)}")
        out.print(f"mean reward {doc['mean_reward']:.3f}, success {doc['success_rate']:.0%} (reward >= "
                  f"{threshold:g}), {doc['model_calls']} model calls captured, {doc['samples']} samples, "
                  f"{doc['errors']} episodes with errors")
        out.print(f"records: {doc['rollouts']}" + (f"; samples: {doc['samples_parquet']}"
                                                   if doc["samples_parquet"] else ""))
    if doc["errors"] == doc["episodes"]:
        typer.echo(f"error: every episode failed; the first: {doc['first_error']}", err=True)
        raise typer.Exit(EXIT_ERROR)
