"""A black-box agent evaluated on every task of an env's split: agent → gateway → model server, the
env's verdict → a training sample, each episode an ``openenv.rollout/3`` record.

For each task of the split (``k`` samples each), one ``CommandHarness`` episode: a session of the
served env is reset to the task (``reset(task_id=...)``), the task's prompt goes to the agent, the
agent's answer (a file it leaves in its working directory, else its stdout) is stepped into the env
as ``{action_field: answer, **action_extra}`` (for the ``coding`` env: ``{"code": ..., "submit":
true}``, graded by its hidden tests), and the episode's capture becomes samples carrying that
reward, the task id and the group id (the task: GRPO's group is the task's ``k`` samples).

``openenv agent-eval`` is the command line of it (``openenv_gateway.cli``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv_gateway.harness import AgentRun, CommandHarness, HarnessEpisode, Verdict, env_verdict, verdict_of

__all__ = ["ACT_TOOL", "ROLLOUTS", "SAMPLES", "ActTool", "SplitEval", "TaskEpisode", "answer_action", "evaluate_split",
           "prompt_of"]

#: The name of the tool that is the env's own action (``tools="act"``).
ACT_TOOL = "act"

#: The files of a run directory.
ROLLOUTS = "rollouts.jsonl"
SAMPLES = "samples.parquet"


def prompt_of(observation: Any) -> str:
    """What the agent is told: the observation's ``prompt`` (else ``instruction``/``message``), else
    the whole observation as text."""
    if isinstance(observation, dict):
        for name in ("prompt", "instruction", "message"):
            value = observation.get(name)
            if isinstance(value, str) and value:
                return value
    return str(observation)


def answer_action(answer_file: str | None, action_field: str, action_extra: dict[str, Any] | None = None
                  ) -> Callable[[AgentRun], dict[str, Any]]:
    """The env action of an agent's run: ``answer_file`` in its working directory if the agent wrote
    it, else its stdout, under ``action_field``, with ``action_extra`` added."""

    def action(run: AgentRun) -> dict[str, Any]:
        if not action_field:  # the answer is not part of the action (the agent acted through tools)
            return dict(action_extra or {})
        path = run.workdir / answer_file if answer_file else None
        text = path.read_text(errors="replace") if path is not None and path.is_file() else run.stdout
        return {action_field: text, **(action_extra or {})}

    return action


class ActTool:
    """The env's own action as one tool, ``act``, for an agent program (``evaluate_split(tools="act")``):
    its arguments are an action of the env (the env's action schema is the tool's input schema), its
    result the observation, reward and done flag. A refused action is a tool error the agent reads
    (the session goes on); once an action ends the episode, later calls are refused and the verdict
    is that step (it is not stepped again). Answers the gateway's JSON-RPC (``tools/list``,
    ``tools/call``); the gateway lets one call of an episode run at a time."""

    def __init__(self, client: Any, action_schema: dict[str, Any]) -> None:
        self.client, self.schema = client, action_schema
        self.last: Any = None  # the last StepResult of a call

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        from openenv.errors import OpenEnvError

        rid = request.get("id")

        def error(code: int, message: str) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}

        method, params = request.get("method"), request.get("params") or {}
        if method == "tools/list":
            return {"jsonrpc": "2.0", "id": rid, "result": {"tools": [{
                "name": ACT_TOOL, "inputSchema": self.schema,
                "description": "Take one action in the environment (its fields: the input schema). Returns the "
                "observation, the reward and whether the episode is over."}]}}
        if method != "tools/call":
            return error(-32601, f"unknown method {method!r}: tools/list and tools/call are answered")
        if params.get("name") != ACT_TOOL:
            return error(-32601, f"unknown tool {params.get('name')!r}; this episode's tool: {ACT_TOOL}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            return error(-32602, "the arguments of act must be an object: the action's fields")
        if self.last is not None and self.last.done:
            return error(-32000, "the episode is over: the last action ended it")
        try:
            step = self.client.step(arguments)
        except OpenEnvError as exc:  # a refused action: the agent is told what was wrong, the session goes on
            return {"jsonrpc": "2.0", "id": rid, "result": {"data": None, "done": False, "metadata": {},
                                                            "error": str(exc)}}
        self.last = step
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "data": step.observation, "done": bool(step.done), "metadata": {"reward": step.reward}, "error": None}}

    def verdict(self, then: Callable[[AgentRun], Verdict]) -> Callable[[AgentRun], Verdict]:
        """The episode's verdict: the step that ended it through ``act``, else ``then(run)``."""

        def judge(run: AgentRun) -> Verdict:
            if self.last is not None and self.last.done:
                return verdict_of(self.last)
            return then(run)

        return judge


@dataclass
class TaskEpisode:
    """One (task, sample) episode of the run."""

    task_id: str
    sample: int
    episode: HarnessEpisode


@dataclass
class SplitEval:
    """The result of ``evaluate_split``: its episodes (task order) and where the records went."""

    env: str
    split: str
    threshold: float
    episodes: list[TaskEpisode] = field(default_factory=list)
    rollouts: Path | None = None
    samples_parquet: Path | None = None

    def summary(self) -> dict[str, Any]:
        """Mean reward, success rate (reward ≥ threshold), per-task means, what the capture holds."""
        rewards = [float(e.episode.reward or 0.0) for e in self.episodes]
        per_task: dict[str, list[float]] = {}
        for e, reward in zip(self.episodes, rewards, strict=True):
            per_task.setdefault(e.task_id, []).append(reward)
        errors = [e.episode.error for e in self.episodes if e.episode.error]
        return {"env": self.env, "split": self.split, "episodes": len(self.episodes), "tasks": len(per_task),
                "mean_reward": statistics.fmean(rewards) if rewards else None,
                "success_rate": (sum(r >= self.threshold for r in rewards) / len(rewards)) if rewards else None,
                "threshold": self.threshold, "errors": len(errors), "first_error": errors[0] if errors else None,
                "model_calls": sum(len(e.episode.trace.turns) for e in self.episodes),
                "samples": sum(len(e.episode.samples) for e in self.episodes),
                "per_task": {t: statistics.fmean(r) for t, r in per_task.items()},
                "rollouts": str(self.rollouts) if self.rollouts else None,
                "samples_parquet": str(self.samples_parquet) if self.samples_parquet else None}


def evaluate_split(base_url: str, *, env: str, split: str, harness: CommandHarness, out_dir: Path,
                   token: str | None = None, k: int = 1, limit: int | None = None,
                   answer_file: str | None = "solution.py", action_field: str = "code",
                   action_extra: dict[str, Any] | None = None, concurrency: int = 1, threshold: float = 1.0,
                   on_episode: Callable[[TaskEpisode], None] | None = None, tools: str = "none") -> SplitEval:
    """Play ``harness``'s agent on the first ``limit`` (all by default) tasks of ``split`` of the env
    served at ``base_url``, ``k`` episodes each, ``concurrency`` at once; write the records to
    ``out_dir/rollouts.jsonl`` (and every sample to ``out_dir/samples.parquet`` when pyarrow is there).
    ``tools="act"`` gives the agent the env's action as the tool ``act`` (``ActTool``: an MCP
    server, the ``openenv-tool`` command, JSON-RPC), so it can act in the env during the episode;
    an empty ``action_field`` makes the closing action ``action_extra`` alone (e.g. ``{"submit": true}``).

    Raises ``ValueError`` for ``k``/``limit``/``concurrency`` below 1 and the env's own
    ``ValidationError`` for an unknown split (it names the env's splits).
    """
    from openenv.client import GenericEnvClient
    from openenv_rollouts import EpisodeRecord
    from openenv_rollouts.records import RolloutWriter

    for name, value in (("k", k), ("concurrency", concurrency), ("limit", 1 if limit is None else limit)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    if tools not in ("none", ACT_TOOL):
        raise ValueError(f"tools must be 'none' or '{ACT_TOOL}', got {tools!r}")
    schema: dict[str, Any] | None = None
    if tools == ACT_TOOL:
        from openenv_rollouts.envinfo import fetch_schema

        schema = fetch_schema(base_url, token)["action"]
    lister = GenericEnvClient(base_url, token=token).sync()
    try:
        tasks = lister.tasks(split)
    finally:
        lister.close()
    tasks = tasks[:limit] if limit is not None else tasks
    if not tasks:
        raise ValueError(f"split {split!r} of env {env!r} has no tasks to evaluate")
    action = answer_action(answer_file, action_field, action_extra)
    policy = "agent:" + " ".join(harness.command)

    def play(task_id: str, sample: int) -> TaskEpisode:
        client = GenericEnvClient(base_url, token=token).sync()
        try:
            def setup() -> str:
                return prompt_of(client.reset(task_id=task_id).observation)

            verdict, act = env_verdict(client, action), None
            if schema is not None:
                act = ActTool(client, schema)
                verdict = act.verdict(verdict)
            episode = harness.run(episode_id=f"{task_id}#{sample}", setup=setup, verdict=verdict,
                                  task_id=task_id, group_id=task_id, tools=act)
        finally:
            client.close()
        return TaskEpisode(task_id, sample, episode)

    result = SplitEval(env=env, split=split, threshold=threshold)
    out_dir.mkdir(parents=True, exist_ok=True)
    result.rollouts = out_dir / ROLLOUTS
    jobs = [(t.id, s) for t in tasks for s in range(k)]
    done: dict[tuple[str, int], TaskEpisode] = {}
    # records are written by this thread only, as episodes finish (a crash keeps what finished)
    with RolloutWriter(result.rollouts, append=False) as writer, ThreadPoolExecutor(concurrency) as pool:
        futures = {pool.submit(play, task_id, sample): (task_id, sample) for task_id, sample in jobs}
        for future in as_completed(futures):
            played = future.result()
            done[futures[future]] = played
            verdict = played.episode.verdict
            writer.write(EpisodeRecord(
                key=f"{played.task_id}#{played.sample}", episode=jobs.index(futures[future]), env=env, policy=policy,
                seed=None, task=None, split=split, sample=played.sample,
                final_observation=verdict.info.get("observation") if verdict else None,
                **played.episode.record_fields()))
            if on_episode is not None:
                on_episode(played)
    result.episodes = [done[job] for job in jobs]
    samples = [s for e in result.episodes for s in e.episode.samples]
    try:
        from openenv_gateway.samples import samples_to_parquet

        result.samples_parquet = samples_to_parquet(samples, out_dir / SAMPLES) if samples else None
    except ImportError:  # pyarrow is the [parquet] extra: the records still hold every sample
        result.samples_parquet = None
    return result
