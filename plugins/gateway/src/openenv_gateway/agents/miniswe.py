"""``python -m openenv_gateway.agents.miniswe``: mini-swe-agent, unmodified, as a harness's agent.

`mini-swe-agent <https://mini-swe-agent.com>`_ (the ``miniswe`` extra installs it from the package
index) is a third-party bash agent that talks to its model through litellm. This launcher only
turns what a harness gives an agent (``OPENENV_PROMPT``, ``OPENENV_MODEL``, ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY`` = the gateway and the episode's key) into mini-swe-agent's own command line and
then *replaces itself* (``exec``) with mini-swe-agent's ``mini`` CLI, so the agent process the
harness watches, times out and kills is mini-swe-agent itself:

``python -m minisweagent.run.mini --yolo --exit-immediately -c <config> -c agent.step_limit=N
-m openai/<model> -t <prompt> -o <trajectory>``

* ``--yolo --exit-immediately`` and ``agent_class: default`` (in the config): no confirmation, no
  prompt at the end, so it runs unattended; ``MSWEA_CONFIGURED`` skips its first-run set-up wizard.
* the model: litellm's ``openai/`` provider with ``api_base`` = ``OPENAI_BASE_URL`` (the gateway)
  and ``OPENAI_API_KEY`` from the environment (the episode's key, never put on a command line);
* limits: ``--step-limit`` (model calls; default 10); a self-hosted model has no price, so its cost
  limit is off and cost tracking ignores litellm's missing price (``cost_tracking: ignore_errors``);
  a failed model call is tried ``--retries`` times (default 2) instead of mini-swe-agent's 10 with
  back-off; the harness's deadline kills whatever is still running;
* no network but the gateway: litellm would download its model-cost map on import
  (``LITELLM_LOCAL_MODEL_COST_MAP=True`` and ``LITELLM_OFFLINE_MODE=true`` make it use its bundled
  copy), Hugging Face hubs are set offline, and mini-swe-agent's global config goes to the working
  directory (its ``HOME`` under a harness);
* the answer: mini-swe-agent is told to leave it in ``--answer-file`` (default ``solution.py``),
  where the harness's verdict reads it; ``-o`` keeps its trajectory (``mini-swe-agent.traj.json``).

``openenv agent-eval ENV --agent mini-swe-agent`` (optionally ``--agent 'mini-swe-agent
--step-limit 5'``) runs this launcher. Exit codes: mini-swe-agent's own; 2 when mini-swe-agent is
not installed or a setting is malformed (the message says what to do).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CONFIG", "OFFLINE_ENV", "PRESET", "TRAJECTORY", "main", "mini_argv", "preset_command"]

#: The config shipped with this launcher (mini-swe-agent's YAML format), always passed first.
CONFIG = Path(__file__).with_name("miniswe.yaml")
#: What ``openenv agent-eval --agent`` accepts as the first word for this launcher.
PRESET = "mini-swe-agent"
#: The trajectory file mini-swe-agent writes in its working directory.
TRAJECTORY = "mini-swe-agent.traj.json"
#: Set for mini-swe-agent's process so that it reaches nothing but the gateway.
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no download of the model-cost map on import
    "LITELLM_OFFLINE_MODE": "true",  # nor of any other catalogue or tokenizer litellm fetches itself
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "MSWEA_CONFIGURED": "true",  # no first-run set-up wizard (it would wait for a terminal)
    "MSWEA_SILENT_STARTUP": "1",
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m openenv_gateway.agents.miniswe",
                                description="Run mini-swe-agent on OPENENV_PROMPT against OPENAI_BASE_URL.")
    p.add_argument("--step-limit", type=int, default=10, help="Most model calls of the run (default 10).")
    p.add_argument("--retries", type=int, default=2, help="Tries of each model call (default 2).")
    p.add_argument("--answer-file", default="solution.py", help="Where the agent is told to leave its answer.")
    p.add_argument("--config", action="append", default=[], type=Path,
                   help="A mini-swe-agent YAML config merged over the shipped one (repeatable).")
    p.add_argument("--command-timeout", type=int, default=30, help="Seconds each bash command may run.")
    return p


def mini_argv(prompt: str, model: str, base_url: str, *, step_limit: int = 10, configs: Sequence[Path] = (),
              command_timeout: int = 30) -> list[str]:
    """mini-swe-agent's own command line for one task (run by this interpreter). The answer file
    reaches the config's templates through the environment (``OPENENV_ANSWER_FILE``)."""
    argv = [sys.executable, "-m", "minisweagent.run.mini", "--yolo", "--exit-immediately",
            "-c", str(CONFIG), *[arg for path in configs for arg in ("-c", str(path))],
            "-c", f"agent.step_limit={step_limit}", "-c", f"environment.timeout={command_timeout}",
            "-c", f"model.model_kwargs.api_base={base_url}",
            # litellm's openai/ provider: the name after the slash is what the gateway receives
            "-m", model if model.startswith("openai/") else f"openai/{model}",
            "-t", prompt, "-o", TRAJECTORY]
    return argv


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Check the settings, then ``exec`` mini-swe-agent (returns only when it cannot start)."""
    env = dict(os.environ if environ is None else environ)
    args = _parser().parse_args(argv)
    if args.step_limit < 1 or args.retries < 1 or args.command_timeout < 1:
        return _fail("--step-limit, --retries and --command-timeout must be at least 1")
    if importlib.util.find_spec("minisweagent") is None:
        return _fail("mini-swe-agent is not installed: pip install 'openenvkit-gateway[miniswe]'")
    missing = [p for p in args.config if not p.is_file()]
    if missing:
        return _fail(f"--config {missing[0]}: no such file (give a mini-swe-agent YAML config)")
    base_url = env.get("OPENAI_BASE_URL", "")
    if not base_url:
        return _fail("OPENAI_BASE_URL is not set: run this under a harness (CommandHarness sets it to the gateway)")
    prompt = env.get("OPENENV_PROMPT") or sys.stdin.read()
    if not prompt.strip():
        return _fail("no task: OPENENV_PROMPT is empty and nothing came on stdin")
    home = Path(env.get("HOME") or Path.cwd())
    env.update(OFFLINE_ENV)
    env.update({"OPENENV_ANSWER_FILE": args.answer_file, "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": str(args.retries),
                "MSWEA_GLOBAL_CONFIG_DIR": str(home / ".mini-swe-agent")})
    command = mini_argv(prompt, env.get("OPENENV_MODEL", "openenv"), base_url, step_limit=args.step_limit,
                        configs=args.config, command_timeout=args.command_timeout)
    sys.stdout.flush()
    os.execve(command[0], command, env)
    return 0  # not reached: exec replaced this process


def preset_command(words: Sequence[str]) -> list[str] | None:
    """``["mini-swe-agent", *options]`` (``--agent``'s shell words) as this launcher's argv; else ``None``."""
    if not words or words[0] != PRESET:
        return None
    return [sys.executable, "-m", "openenv_gateway.agents.miniswe", *words[1:]]


if __name__ == "__main__":
    raise SystemExit(main())
