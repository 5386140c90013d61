"""A generic command harness: any agent program, its model calls captured by the gateway, judged by the env.

One episode, all inside one wall-clock deadline:

1. **setup** (e.g. reset the env session for the task) gives the task's prompt;
2. the **agent** runs as a subprocess in a fresh working directory, in a new process group, with
   ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` pointing
   at the gateway with the episode's own key, ``OPENENV_PROMPT`` holding the prompt (also on its
   stdin), and none of the caller's environment beyond ``PATH``/``LANG`` (no ambient credentials);
3. the **verdict** (e.g. step the env with the agent's answer) scores what the agent left.

The deadline always ends the episode: an agent still running is killed (its whole process group),
a setup or verdict still running is abandoned, and the record says which part ran out of time. A
crashed agent is still graded (the env decides what its output is worth). What the agent sent to
the model becomes training samples (``openenv_gateway.samples``) with the verdict's reward.

The agent's network: ``network="host"`` (the default) leaves it as the harness's own: it can reach
any address. ``network="gateway-only"`` runs it under bubblewrap in its own network namespace with
the gateway bridged in (``openenv_gateway.netbridge``): the gateway is then the only address it can
reach, and the file system is read-only outside its working directory.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from openenv_gateway.dockerrun import CONTAINER_PATH, DockerLimits, docker_argv, remove_container, tool_wrapper
from openenv_gateway.gateway import CaptureGateway, ToolHandler
from openenv_gateway.mcptools import MCP_PATH
from openenv_gateway.samples import TrainingSample, samples_from_trace
from openenv_gateway.trace import EpisodeTrace

__all__ = ["AgentRun", "CommandHarness", "HarnessEpisode", "Verdict", "env_verdict", "verdict_of"]

T = TypeVar("T")
_OUTPUT_LIMIT = 1 << 20  # what of the agent's stdout/stderr is kept (the rest is cut, and said so)


@dataclass
class AgentRun:
    """What the agent process did."""

    exit_code: int | None
    stdout: str
    stderr: str
    workdir: Path
    timed_out: bool
    duration_s: float


@dataclass
class Verdict:
    """The env's judgement of the episode."""

    reward: float | None
    components: dict[str, float] = field(default_factory=dict)
    done: bool = True
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class HarnessEpisode:
    """One harness episode: the agent's run, the verdict, the capture and the samples built from it."""

    episode_id: str
    task_id: str | None
    group_id: str | None
    run: AgentRun | None
    verdict: Verdict | None
    trace: EpisodeTrace
    samples: list[TrainingSample]
    error: dict[str, Any] | None
    duration_s: float

    @property
    def reward(self) -> float | None:
        return self.verdict.reward if self.verdict else None

    def record_fields(self) -> dict[str, Any]:
        """The fields of an ``openenv.rollout/3`` episode record this episode fills."""
        return {"task_id": self.task_id, "group_id": self.group_id, "status": "error" if self.error else "ok",
                "error": self.error, "reward": float(self.reward or 0.0),
                "reward_components": dict(self.verdict.components) if self.verdict else {},
                "done": bool(self.verdict and self.verdict.done), "duration_s": self.duration_s,
                "samples": [s.to_dict() for s in self.samples]}


class _Deadline(Exception):
    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


def _bounded(fn: Callable[[], T], timeout_s: float, phase: str) -> T:
    """``fn()`` in a worker thread, abandoned (not waited for) after ``timeout_s``."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, daemon=True, name=f"harness-{phase}")
    worker.start()
    worker.join(max(timeout_s, 0.0))
    if worker.is_alive():
        raise _Deadline(phase)
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


class CommandHarness:
    """Runs ``command`` (argv) as the agent of each episode, against ``gateway``.

    ``deadline_s`` bounds the whole episode (setup + agent + verdict); ``grade_reserve_s`` of it is
    kept for the verdict (the agent is killed that long before the deadline). ``model`` is passed to
    the agent as ``OPENENV_MODEL``.
    """

    def __init__(self, gateway: CaptureGateway, command: list[str], *, deadline_s: float = 600.0,
                 grade_reserve_s: float = 30.0, model: str = "openenv", extra_env: dict[str, str] | None = None,
                 keep_workdir: bool = False, network: Literal["host", "gateway-only"] = "host",
                 runtime: Literal["process", "docker"] = "process", image: str | None = None,
                 docker_limits: DockerLimits | None = None) -> None:
        if not command:
            raise ValueError("command must name the agent program to run, e.g. ['python', 'agent.py']")
        if grade_reserve_s >= deadline_s:
            raise ValueError(f"grade_reserve_s ({grade_reserve_s}) must be less than deadline_s ({deadline_s})")
        self.gateway, self.command = gateway, list(command)
        self.deadline_s, self.grade_reserve_s = deadline_s, grade_reserve_s
        self.model, self.extra_env, self.keep_workdir = model, dict(extra_env or {}), keep_workdir
        if network not in ("host", "gateway-only"):
            raise ValueError(f"network must be 'host' or 'gateway-only', got {network!r}")
        if runtime not in ("process", "docker"):
            raise ValueError(f"runtime must be 'process' or 'docker', got {runtime!r}")
        if runtime == "docker":
            if not image:
                raise ValueError("runtime='docker' runs the agent in a container: give the image (with python3 and "
                                 "the agent program), e.g. image='openenv-base:bookworm'")
            if shutil.which("docker") is None:
                raise ValueError("runtime='docker' needs the docker CLI and an engine: install Docker, or use "
                                 "runtime='process'")
            network = "gateway-only"  # a container of its own has no network but the bridged gateway
        elif network == "gateway-only" and shutil.which("bwrap") is None:
            raise ValueError("network='gateway-only' runs the agent under bubblewrap, which is not installed: "
                             "install it (Debian: apt-get install bubblewrap) or use network='host'")
        self.network, self.runtime, self.image = network, runtime, image
        self.docker_limits = docker_limits or DockerLimits()

    def _agent_env(self, key: str, prompt: str, workdir: Path, tools: bool = False) -> dict[str, str]:
        base = self.gateway.base_url
        env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT") if k in os.environ}
        env.update({"HOME": str(workdir), "TMPDIR": str(workdir), "OPENAI_BASE_URL": base + "/v1",
                    "OPENAI_API_KEY": key, "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": key,
                    "OPENENV_PROMPT": prompt, "OPENENV_MODEL": self.model, "NO_PROXY": "127.0.0.1",
                    "no_proxy": "127.0.0.1"})
        if self.runtime == "docker":
            env["PATH"] = CONTAINER_PATH
        if tools:
            env["OPENENV_TOOLS_URL"] = base + "/v1/openenv/tools"
            env["OPENENV_MCP_URL"] = base + MCP_PATH
            wrapper = tool_wrapper() if self.runtime == "docker" else None
            env["PATH"] = str(_offer_tools(workdir, key, base + MCP_PATH, wrapper)) + os.pathsep + env.get("PATH", "")
        env.update(self.extra_env)
        return env

    def _run_agent(self, key: str, prompt: str, workdir: Path, timeout_s: float, tools: bool = False) -> AgentRun:
        started = time.monotonic()
        argv, bridge, container = self.command, None, None
        env = self._agent_env(key, prompt, workdir, tools)
        if self.network == "gateway-only":
            from openenv_gateway.netbridge import UnixBridge, bwrap_argv

            port = int(self.gateway.base_url.rsplit(":", 1)[1])
            sock = workdir / ".gateway.sock"
            bridge = UnixBridge(sock, port)
            if self.runtime == "docker":
                assert self.image is not None
                secret = [k for k in env if k.endswith("_API_KEY")]
                argv, container = docker_argv(
                    image=self.image, workdir=workdir, sock=sock, port=port, command=self.command,
                    env_names=secret, env_values={k: v for k, v in env.items() if k not in secret},
                    limits=self.docker_limits)
                # the Docker CLI itself runs with the host's PATH; the agent's values travel in -e
                env = {**{k: v for k, v in os.environ.items() if k.startswith("DOCKER_")},
                       **{k: env[k] for k in secret}, "PATH": os.environ.get("PATH", CONTAINER_PATH),
                       "HOME": os.environ.get("HOME", str(workdir))}
            else:
                argv = bwrap_argv(workdir, sock, port, self.command)
        try:
            return self._spawn(argv, env, prompt, workdir, timeout_s, started, container)
        finally:
            if container is not None:
                remove_container(container)
            if bridge is not None:
                bridge.close()

    def _spawn(self, argv: list[str], env: dict[str, str], prompt: str, workdir: Path, timeout_s: float,
               started: float, container: str | None = None) -> AgentRun:
        proc = subprocess.Popen(argv, cwd=workdir, env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # its own group: the deadline kills its children too
        timed_out = False
        try:
            out, err = proc.communicate(prompt.encode(), timeout=max(timeout_s, 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
            if container is not None:  # killing the Docker CLI would leave the container running
                remove_container(container)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = proc.communicate(timeout=10)
        return AgentRun(exit_code=None if timed_out else proc.returncode,
                        stdout=out[:_OUTPUT_LIMIT].decode(errors="replace"),
                        stderr=err[-_OUTPUT_LIMIT:].decode(errors="replace"), workdir=workdir, timed_out=timed_out,
                        duration_s=time.monotonic() - started)

    def run(self, *, episode_id: str, verdict: Callable[[AgentRun], Verdict], prompt: str = "",
            setup: Callable[[], str] | None = None, task_id: str | None = None,
            group_id: str | None = None, max_model_calls: int | None = None,
            tools: ToolHandler | None = None) -> HarnessEpisode:
        """Play one episode (never raises for what the agent or env did: it is in ``error``).
        ``max_model_calls``: the gateway refuses the agent's calls beyond it (429 ``turn_limit``).
        ``tools``: the env's tools for the agent, three ways at once: an MCP server at
        ``OPENENV_MCP_URL`` (also written to ``.mcp.json`` in its folder, the file Claude Code and
        other MCP clients read), the ``openenv-tool`` command on its ``PATH``, and plain JSON-RPC 2.0
        at ``OPENENV_TOOLS_URL`` — each with the episode's key."""
        started = time.monotonic()
        deadline = started + self.deadline_s
        key = self.gateway.open_episode(episode_id, {"task_id": task_id, "group_id": group_id},
                                        max_turns=max_model_calls, tools=tools)
        workdir = Path(tempfile.mkdtemp(prefix="openenv-agent-"))
        run: AgentRun | None = None
        result: Verdict | None = None
        error: dict[str, Any] | None = None
        try:
            if setup is not None:
                prompt = _bounded(setup, deadline - time.monotonic() - self.grade_reserve_s, "setup")
            run = self._run_agent(key, prompt, workdir, deadline - time.monotonic() - self.grade_reserve_s,
                                  tools is not None)
            if run.timed_out:
                error = {"kind": "deadline", "phase": "agent", "message": f"the agent was still running at the "
                         f"episode's deadline ({self.deadline_s:g}s, {self.grade_reserve_s:g}s kept for grading): "
                         "killed; its output so far was graded"}
            elif run.exit_code != 0:
                error = {"kind": "agent", "exit_code": run.exit_code, "message": f"the agent exited with "
                         f"{run.exit_code}; its output was graded", "stderr_tail": run.stderr[-2000:]}
            finished = run
            result = _bounded(lambda: verdict(finished), deadline - time.monotonic(), "verdict")
        except _Deadline as exc:
            error = {"kind": "deadline", "phase": exc.phase,
                     "message": f"the episode's deadline ({self.deadline_s:g}s) passed during {exc.phase}"}
        except Exception as exc:  # the env (setup or verdict) failed: the episode ends, recorded
            error = {"kind": "env", "type": type(exc).__name__, "message": str(exc)}
        finally:
            trace = self.gateway.close_episode(key)
            if not self.keep_workdir:
                shutil.rmtree(workdir, ignore_errors=True)
        samples = samples_from_trace(trace, reward=result.reward if result else None,
                                     reward_components=result.components if result else None,
                                     task_id=task_id, group_id=group_id)
        return HarnessEpisode(episode_id, task_id, group_id, run, result, trace, samples, error,
                              time.monotonic() - started)


def env_verdict(client: Any, action_of: Callable[[AgentRun], Any]) -> Callable[[AgentRun], Verdict]:
    """A verdict that steps a reset/step env client (``GenericEnvClient(...).sync()``, already reset)
    with ``action_of(run)`` and takes the env's reward, components and done flag."""

    def judge(run: AgentRun) -> Verdict:
        return verdict_of(client.step(action_of(run)))

    return judge


def verdict_of(step: Any) -> Verdict:
    """The env's verdict in one step result: its reward, reward components and done flag."""
    components = getattr(step, "reward_components", None)
    if not components and isinstance(step.observation, dict):
        components = (step.observation.get("metadata") or {}).get("reward_components")
    return Verdict(reward=None if step.reward is None else float(step.reward),
                   components={str(k): float(v) for k, v in (components or {}).items()}, done=bool(step.done),
                   info={"observation": step.observation})


def _offer_tools(workdir: Path, key: str, mcp_url: str, wrapper: str | None = None) -> Path:
    """``.mcp.json`` (the episode's MCP server, for agents that read one) and ``openenv-tool`` (the
    tools as a command) in the agent's folder; returns the folder to put first on its ``PATH``."""
    (workdir / ".mcp.json").write_text(json.dumps({"mcpServers": {"openenv": {
        "type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer {key}"}}}}, indent=2) + "\n")
    bin_dir = workdir / ".openenv" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    tool = bin_dir / "openenv-tool"
    tool.write_text(wrapper or f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m openenv_gateway.toolcli \"$@\"\n")
    tool.chmod(0o755)
    return bin_dir
