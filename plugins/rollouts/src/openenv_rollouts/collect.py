"""``collect(...)``: play N episodes over C concurrent sessions and write one record per episode.

How a run goes:

* One env server (``EnvServer``: a provider, ``local`` by default, or ``base_url=``) holds ``C``
  sessions; ``C`` workers, each with its own connection, take episodes off a queue. With
  ``replicas=N`` the provider starts N servers behind an ``openenv.EnvPool`` that places each
  worker's session on the least-loaded one; a replica that dies fails its episodes' attempts, which
  are retried on the others (``retries``), and the pool replaces it.
* What each episode plays comes from a plan (``openenv_rollouts.plan``): for ``collect``, episode
  ``i`` of group ``g = i // group_size`` resets with ``seed + g`` (when ``seed`` is given) and the
  task row ``tasks[g % len(tasks)]`` as reset keywords, or with a task of the server's ``split``
  drawn by a task sampler; its key is ``ep-<i>`` (``--resume`` skips keys already written).
  ``openenv eval`` runs the same machinery with its own plan (every task of a split, k times).
* A policy that raises or returns an action the env refuses ends that episode as an error (the
  env's validation errors are kept in the record); it is not retried. A broken connection or a
  dead server fails the attempt; the server is restarted through its provider and the episode
  retried up to ``retries`` times. Once more than ``max_errors`` episodes have failed, no new
  episodes start and the summary says the error budget is spent.
* Each finished episode is written (and fsynced) at once, in completion order.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.errors import ConfigError, OpenEnvError, SessionLostError, ValidationError
from openenv_rollouts.checkpoints import Checkpoints
from openenv_rollouts.envinfo import EnvInfo, fetch_schema, list_tools
from openenv_rollouts.plan import CollectPlan, EpisodePlan, EpisodeSpec, episode_key, server_tasks
from openenv_rollouts.policies import Decision, EpisodeContext, Policy, make_policy
from openenv_rollouts.records import EpisodeRecord, RolloutWriter, StepRecord, UnwritableRecord, read_records
from openenv_rollouts.sampler import TaskSampler
from openenv_rollouts.server import EnvServer

__all__ = ["CollectSummary", "collect", "collect_async", "episode_key", "load_tasks", "run_plan"]

_INFRA_ERRORS: tuple[type[BaseException], ...] = (SessionLostError, ConnectionError, OSError, TimeoutError)


@dataclass
class CollectSummary:
    env: str
    policy: str
    provider: str | None
    output: str
    episodes: int = 0
    ok: int = 0
    errors: int = 0
    skipped: int = 0
    steps: int = 0
    mean_reward: float | None = None
    std_reward: float | None = None
    component_means: dict[str, float] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)
    restarts: int = 0
    elapsed_s: float = 0.0
    budget_spent: bool = False
    max_errors: int = 0
    not_started: int = 0
    #: Episodes continued from a checkpoint (``checkpoint_every``) instead of started over.
    resumed: int = 0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items()}
        doc.update(schema="openenv.collect/1", steps_per_s=round(self.steps_per_s, 3),
                   episodes_per_s=round(self.episodes_per_s, 3), elapsed_s=round(self.elapsed_s, 3))
        return doc


log = logging.getLogger("openenv_rollouts.collect")


def _components(result: Any) -> dict[str, float]:
    """The step's reward components: finite numbers by name."""
    comps = getattr(result, "reward_components", None)
    if not comps and isinstance(result.metadata, dict):
        comps = result.metadata.get("reward_components")
    if not isinstance(comps, dict):
        return {}
    for k, v in comps.items():
        if type(k) is not str or type(v) is not float or not math.isfinite(v):
            break
    else:  # already clean (the client's own floats): kept as it is, no copy per step
        return comps
    return {str(k): float(v) for k, v in comps.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}


def _mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and population standard deviation in floats (``statistics.pstdev`` computes in exact
    fractions: a tenth of a second for a thousand rewards, minutes for a million)."""
    mean = math.fsum(values) / len(values)
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / len(values))


def _error(kind: str, exc: BaseException) -> dict[str, Any]:
    doc: dict[str, Any] = {"kind": kind, "type": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, ValidationError):
        doc["errors"] = list(getattr(exc, "errors", None) or [])
    return doc


class _Run:
    def __init__(self, server: EnvServer, policy: Policy, info: EnvInfo, *, env: str, plan: EpisodePlan,
                 max_steps: int, retries: int, max_errors: int,
                 transport: str | None, writer: RolloutWriter, summary: CollectSummary,
                 checkpoints: Checkpoints | None = None,
                 on_episode: Callable[[EpisodeRecord], None] | None) -> None:
        self.server, self.policy, self.info, self.env = server, policy, info, env
        self.plan, self.max_steps, self.retries = plan, max_steps, retries
        self.max_errors, self.transport, self.writer, self.summary = max_errors, transport, writer, summary
        self.on_episode = on_episode
        self.checkpoints = checkpoints
        self.rewards: list[float] = []
        self.component_sums: dict[str, float] = {}
        self.stop = False

    async def worker(self, queue: asyncio.Queue[int]) -> None:
        client: Any = None
        generation = self.server.generation
        try:
            while not self.stop:
                try:
                    index = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                record: EpisodeRecord | None = None
                for attempt in range(1, self.retries + 2):
                    try:
                        if client is None:
                            generation = self.server.generation
                            client = await _connect(self.server, self.transport)
                        record = await self.play(client, index)
                        record.attempts = attempt
                        break
                    except _INFRA_ERRORS as exc:
                        record = self._failed(index, _error("env", exc), attempt)
                        await self.server.release(client)
                        client = None
                        if not await self.server.recover(generation):
                            break
                self._finish(record)
        finally:
            await self.server.release(client)

    def _record(self, spec: EpisodeSpec, **fields: Any) -> EpisodeRecord:
        return EpisodeRecord(key=spec.key, episode=spec.index, env=self.env, policy=self.policy.name,
                             seed=spec.seed, task=dict(spec.task) if spec.task else None, task_id=spec.task_id,
                             split=spec.split, group_id=spec.group_id, sample=spec.sample,
                             started_at=time.time(), **fields)

    def _failed(self, index: int, error: dict[str, Any], attempts: int) -> EpisodeRecord:
        return self._record(self.plan.spec(index), status="error", error=error, attempts=attempts)

    async def play(self, client: Any, index: int) -> EpisodeRecord:
        spec = self.plan.spec(index)
        record = self._record(spec)
        seed, task = spec.seed, record.task
        started = time.perf_counter()
        rng_seed = spec.rng_seed if spec.rng_seed is not None else seed
        rng = random.Random(rng_seed if rng_seed is not None else random.randrange(2**62))
        ctx = EpisodeContext(episode=spec.index, seed=seed, task=task, info=self.info, rng=rng,
                             task_id=spec.task_id, group_id=spec.group_id)
        steps, history, sums = record.steps, ctx.history, record.reward_components
        result = await self._resume(client, spec.key, record, ctx, rng)
        if result is None:
            result = await client.reset(**spec.reset_kwargs())
        observation = result.observation
        # Locals, not attribute lookups: this loop runs once per step of every episode.
        act, step, clock = self.policy.act, client.step, time.perf_counter
        act_now = getattr(self.policy, "act_now", None)  # a policy that never awaits: no coroutine per step
        max_steps = self.max_steps
        while not result.done and ctx.t < max_steps:
            t0 = clock()
            try:
                action = act_now(observation, ctx) if act_now is not None else await act(observation, ctx)
            except Exception as exc:
                record.status, record.error = "error", _error("policy", exc)
                break
            t1 = clock()
            info = None
            if type(action) is Decision:
                action, info = action.action, action.info
            if not isinstance(action, dict):
                action = action.model_dump() if hasattr(action, "model_dump") else action
            try:
                result = await step(action)
            except TypeError as exc:  # not JSON: the frame was never sent, the session is intact
                record.status, record.error = "error", _error("invalid_action", exc)
                record.error["message"] = f"the action cannot be sent as JSON: {exc}"
                record.error["action"] = action
                break
            except ValidationError as exc:
                record.status, record.error = "error", _error("invalid_action", exc)
                record.error["action"] = action
                break
            except OpenEnvError as exc:
                if isinstance(exc, SessionLostError):
                    raise
                record.status, record.error = "error", _error("env", exc)
                break
            t2 = clock()
            comps = _components(result)
            reward = result.reward
            # microseconds: int() of the scaled duration (round(x, 6) costs five times as much)
            steps.append(StepRecord(ctx.t, observation, action, reward, comps, result.done,
                                    int((t2 - t1) * 1e6 + 0.5) / 1e6, int((t1 - t0) * 1e6 + 0.5) / 1e6, info))
            history.append({"observation": observation, "action": action, "reward": reward})
            if reward:
                record.reward += reward
            for name, value in comps.items():
                sums[name] = sums.get(name, 0.0) + value
            observation = result.observation
            ctx.t += 1
            if self.checkpoints is not None and ctx.t % self.checkpoints.every == 0 and not result.done:
                await self._checkpoint(client, spec.key, record, ctx, rng)
        record.done = bool(result.done)
        obs_truncated = isinstance(observation, dict) and bool(observation.get("truncated"))
        record.truncated = record.status == "ok" and (obs_truncated or not result.done)
        record.final_observation = observation
        record.duration_s = time.perf_counter() - started
        return record

    async def _resume(self, client: Any, key: str, record: EpisodeRecord, ctx: EpisodeContext,
                      rng: random.Random) -> Any:
        """The episode continued from its checkpoint (``Checkpoints.resume``), or ``None``."""
        if self.checkpoints is None:
            return None
        result = await self.checkpoints.resume(client, key, record, ctx, rng, self.policy)
        if result is not None:
            self.summary.resumed += 1
        return result

    async def _checkpoint(self, client: Any, key: str, record: EpisodeRecord, ctx: EpisodeContext,
                          rng: random.Random) -> None:
        assert self.checkpoints is not None
        if not await self.checkpoints.checkpoint(client, key, record, ctx, rng, self.policy):
            self.checkpoints = None  # the env cannot snapshot: off for the run (warned once)

    def _finish(self, record: EpisodeRecord | None) -> None:
        if record is None:
            return
        # A finished episode's checkpoint is done with, unless its server died under it (a later
        # --resume continues it from there).
        if self.checkpoints is not None and (record.status == "ok" or (record.error or {}).get("kind") != "env"):
            self.checkpoints.drop(record.key)
        try:
            self.writer.write(record)
        except UnwritableRecord as exc:
            # only what the policy made can be unwritable (the env's answers arrived as JSON):
            # the episode is kept as an error without its steps
            record = self._failed(record.episode, {"kind": "policy", "type": type(exc).__name__,
                                                   "message": f"the episode's actions are {exc}"}, record.attempts)
            self.writer.write(record)
        s = self.summary
        s.episodes += 1
        s.steps += record.num_steps
        if record.status == "ok":
            s.ok += 1
            self.rewards.append(record.reward)
            for name, value in record.reward_components.items():
                self.component_sums[name] = self.component_sums.get(name, 0.0) + value
        else:
            s.errors += 1
            kind = str((record.error or {}).get("kind", "error"))
            s.error_kinds[kind] = s.error_kinds.get(kind, 0) + 1
            if s.errors > self.max_errors:
                self.stop = s.budget_spent = True
        self.plan.finished(record)
        if self.on_episode is not None:
            self.on_episode(record)


async def _connect(server: EnvServer, transport: str | None) -> Any:
    return await server.connect(transport)


#: Container allocations between two young-generation collections while a run is going on (CPython's
#: default is 700).
_YOUNG_THRESHOLD = 20_000


@contextlib.contextmanager
def _collector_tuned() -> Iterator[None]:
    """CPython's cycle collector set for a run, and restored after it.

    Every step of an in-flight episode (its observation, action, record) stays alive until the
    episode is written, so far more objects survive a young collection than under plain stepping:
    at the default threshold the collector traverses each step's objects two or three times before
    they are freed, and runs full collections over the whole heap (the imported libraries, a
    trainer's model) again and again. For the run, the heap from before it is frozen (``gc.freeze``:
    skipped by every collection) and young collections wait for ``_YOUNG_THRESHOLD`` allocations,
    by when most episodes are written and freed; cycles made during the run are still collected.
    Measured on ``bench.collect``: the collector's time per run falls from ~0.2 s to ~0.03 s. A
    process that froze objects itself (a pre-fork server), or another run going on, is left alone.
    """
    if gc.get_freeze_count():
        yield
        return
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(thresholds[0], _YOUNG_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _written(out: Path) -> dict[str, dict[str, Any]]:
    """The episodes already in ``out`` by key (a torn last line is cut off first)."""
    from openenv_rollouts.records import repair

    if not out.exists():
        return {}
    repair(out)
    return {str(r["key"]): r for r in read_records(out)}


def load_tasks(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL task file (one JSON object per line: the reset keywords of one episode)."""
    import json

    rows: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc}); each line must be one JSON object.") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: a task row must be a JSON object, got {type(row).__name__}.")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no task rows.")
    return rows


async def run_plan(
    env: str, plan: Callable[[EnvServer, dict[str, dict[str, Any]]], Any], *, concurrency: int = 4,
    output: Path | str = "rollouts.jsonl", policy: str | Policy = "random", provider: str | None = None,
    base_url: str | None = None, token: str | None = None, max_steps: int = 100, retries: int = 1,
    max_errors: int | None = None, resume: bool = False, transport: str | None = None,
    llm: dict[str, Any] | None = None, on_episode: Callable[[EpisodeRecord], None] | None = None,
    on_start: Callable[[int], None] | None = None, replicas: int = 1,
    provider_options: dict[str, Any] | None = None, checkpoint_every: int = 0, metrics_port: int | None = None,
) -> CollectSummary:
    """Play the episodes of a plan: the machinery ``collect`` and ``eval`` share.

    ``replicas=N`` (N > 1) starts N servers through the provider behind an ``EnvPool``: sessions
    are spread over them, an episode whose replica dies is retried on another (``retries``);
    ``metrics_port`` serves the pool's metrics on 127.0.0.1 (``EnvServer.start_pool``).
    ``provider_options`` go to the provider's ``LaunchSpec.options`` (``{"cpus": 0.25}``).
    ``checkpoint_every=K`` snapshots each episode every K steps, so a retry or a ``resume`` continues
    it from there (``openenv_rollouts.checkpoints``; the env must support snapshots).

    ``plan(server, written)`` is awaited once the server is up, with the records already in
    ``output`` by key (empty unless ``resume``), and returns the ``EpisodePlan``; every planned
    key not written yet is played over ``concurrency`` sessions, within the error budget
    (``max_errors``, default 10 % of the plan), and written to ``output`` as it finishes."""
    out = Path(output)
    written = _written(out) if resume else {}
    concurrency = max(1, concurrency)
    if replicas < 1:
        raise ConfigError(f"replicas must be >= 1, got {replicas}.")
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 0:
        raise ConfigError(f"checkpoint_every must be a whole number of steps (0: off), got {checkpoint_every!r}.")
    if metrics_port is not None and replicas < 2:
        raise ConfigError("--metrics-port serves the metrics of the pool that --replicas N (N > 1) starts; add "
                          "--replicas, or scrape a single server's own /metrics (openenvkit-metrics).")
    if replicas > 1 and base_url:
        raise ConfigError("--replicas starts servers through a provider; it cannot be combined with --base-url "
                          "(drop --base-url, or use openenv.EnvPool([...urls]) from Python).")
    checkpoints = Checkpoints(out, checkpoint_every) if checkpoint_every else None
    # The servers this run starts seal snapshots with the checkpoints' own key, so a --resume with
    # new servers can restore them (openenv_rollouts.checkpoints).
    env_vars = {"OPENENV_SNAPSHOT_KEY": checkpoints.snapshot_key()} if checkpoints is not None else None
    if replicas > 1:
        # Each replica can hold every worker's session: while a dead one is being replaced the
        # others take its retried episodes (a smaller cap would refuse them with CAPACITY_REACHED).
        server = await EnvServer.start_pool(env, replicas=replicas, provider=provider, transport=transport,
                                            max_sessions=concurrency + 1, options=provider_options,
                                            env_vars=env_vars, metrics_port=metrics_port)
    else:
        server = (EnvServer.attach(env, base_url, token) if base_url else
                  await EnvServer.start(env, provider=provider, max_sessions=concurrency + 1,
                                        options=provider_options, env_vars=env_vars))
    summary = CollectSummary(env=env, policy=policy if isinstance(policy, str) else policy.name,
                             provider=server.provider, output=str(out))
    the_policy: Policy | None = None
    try:
        the_plan: EpisodePlan = await plan(server, written)
        todo = [i for i, key in enumerate(the_plan.keys) if key not in written]
        summary.skipped = len(the_plan.keys) - len(todo)
        summary.max_errors = budget = (max_errors if max_errors is not None
                                       else max(1, math.ceil(len(the_plan.keys) / 10)))
        concurrency = max(1, min(concurrency, len(todo) or 1))
        schema = await asyncio.to_thread(fetch_schema, server.base_url, server.token)
        info = EnvInfo(schema)
        if info.mcp:
            probe = await _connect(server, transport)
            try:
                await probe.reset(**the_plan.probe_kwargs())
                info.tools = await list_tools(probe)
            finally:
                await server.release(probe)
        the_policy = make_policy(policy, info, **(llm or {})) if isinstance(policy, str) else policy
        summary.policy = the_policy.name
        if on_start is not None:
            on_start(len(todo))
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in todo:
            queue.put_nowait(i)
        started = time.perf_counter()
        with _collector_tuned(), RolloutWriter(out, append=resume, image_fields=info.image_fields) as writer:
            run = _Run(server, the_policy, info, env=env, plan=the_plan, max_steps=max_steps,
                       retries=retries, max_errors=budget, transport=transport, writer=writer,
                       summary=summary, on_episode=on_episode,
                       checkpoints=checkpoints)
            try:
                await asyncio.gather(*(run.worker(queue) for _ in range(concurrency)))
            finally:
                the_plan.save()
        summary.elapsed_s = time.perf_counter() - started
        summary.not_started = queue.qsize()
        summary.restarts = server.pool.replacements if server.pool is not None else server.restarts
        if run.rewards:
            summary.mean_reward, summary.std_reward = _mean_std(run.rewards)
            summary.component_means = {k: v / len(run.rewards) for k, v in sorted(run.component_sums.items())}
    finally:
        closer = getattr(the_policy, "aclose", None)
        if closer is not None:
            await closer()
        await server.stop()
    return summary


async def collect_async(
    env: str, *, episodes: int = 10, concurrency: int = 4, output: Path | str = "rollouts.jsonl",
    policy: str | Policy = "random", provider: str | None = None, base_url: str | None = None,
    token: str | None = None, seed: int | None = None, tasks: list[dict[str, Any]] | Path | str | None = None,
    max_steps: int = 100, retries: int = 1, max_errors: int | None = None, resume: bool = False,
    transport: str | None = None, llm: dict[str, Any] | None = None,
    on_episode: Callable[[EpisodeRecord], None] | None = None,
    on_start: Callable[[int], None] | None = None, group_size: int = 1, split: str | None = None,
    sampler: str | TaskSampler = "uniform", sampler_weights: dict[str, float] | None = None,
    threshold: float = 1.0, replicas: int = 1, provider_options: dict[str, Any] | None = None,
    checkpoint_every: int = 0, metrics_port: int | None = None,
) -> CollectSummary:
    """Collect ``episodes`` episodes of ``env``; see the module docstring. Returns the summary.

    ``group_size=G``: episodes come in groups of ``G`` that play the same task with the same seed
    and share a ``group_id`` (recorded). ``split=``: each group plays a task of the server's split,
    drawn by ``sampler`` (``uniform``, ``weighted`` with ``sampler_weights``, ``signal``, or a
    ``TaskSampler``; an episode succeeds when its reward is at least ``threshold``); its state is
    saved to ``<output>.sampler.json`` and restored by ``resume``."""
    out = Path(output)
    if isinstance(tasks, str | Path):
        tasks = load_tasks(Path(tasks))
    if split is not None and tasks:
        raise ConfigError("give either tasks= (reset keywords from a file) or split= (the server's tasks), not both.")

    async def make(server: EnvServer, written: dict[str, dict[str, Any]]) -> EpisodePlan:
        task_ids: list[str] | None = None
        if split is not None:
            task_ids = [t.id for t in await server_tasks(server, split)]
        return CollectPlan(env=env, episodes=episodes, seed=seed, rows=tasks, group_size=group_size,
                           split=split, task_ids=task_ids, sampler=sampler, sampler_weights=sampler_weights,
                           threshold=threshold, state_path=Path(str(out) + ".sampler.json"), written=written)

    return await run_plan(env, make, concurrency=concurrency, output=out, policy=policy, provider=provider,
                          base_url=base_url, token=token, max_steps=max_steps, retries=retries,
                          max_errors=max_errors, resume=resume, transport=transport, llm=llm,
                          on_episode=on_episode, on_start=on_start, replicas=replicas,
                          provider_options=provider_options, checkpoint_every=checkpoint_every,
                          metrics_port=metrics_port)


def collect(env: str, **kwargs: Any) -> CollectSummary:
    """Blocking ``collect_async`` (from code that has no event loop running)."""
    return asyncio.run(collect_async(env, **kwargs))
