"""The wire-level checks of ``openenv validate``: everything a client can see of a running server.

Run against a URL as given, or against the env served on 127.0.0.1 by a real server in this
process (``live_server``), where the server's ``close`` of the env is recorded too.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import urllib.request
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from openenv.cli._validate_core import CheckFailed, NotApplicable, Report
from openenv.testing.env_contract import without_fields

__all__ = ["served_checks", "wire_checks"]

_WIRE = ("health", "schema", "reset_step", "reward_in_range_wire", "seeded_reset", "step_before_reset",
         "step_after_done", "parallel_sessions")


def _get_json(url: str, path: str) -> Any:
    with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as response:
        return json.loads(response.read())


def _unreachable() -> str:
    raise NotApplicable("the server does not answer (see health)")


#: The server's own refusal of a step that returned no observation (``sessions.session``): a
#: structured error, but the env is what is broken.
_NOT_AN_OBSERVATION = "expected an Observation instance"


def _malformed(result: Any, observation_types: tuple[type[BaseModel], ...], obs_schema: dict[str, Any],
               reward_range: tuple[float, float] | None) -> str | None:
    """Why an accepted step's result is not well formed (``None`` when it is): its observation must
    validate as one of ``observation_types`` (or, when none is known, have the fields ``/schema``
    requires), and its reward must be finite and inside ``reward_range``."""
    obs, reward = result.observation, result.reward
    if not isinstance(obs, dict):
        return f"its observation is a {type(obs).__name__}, not an object"
    if observation_types:
        errors: list[str] = []
        for kind in observation_types:
            try:
                kind.model_validate({**obs, "reward": reward, "done": result.done})
                break
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"]) or "(root)"
                errors.append(f"{exc.error_count()} error(s); {where}: {first['msg']}")
        else:
            names = " or ".join(kind.__name__ for kind in observation_types)
            return f"its observation is not a valid {names} ({errors[0]})"
    else:
        missing = sorted(set(obs_schema.get("required", ())) - set(obs) - {"reward", "done"})
        if missing:
            return f"its observation lacks the required field(s) {missing}"
    if reward is not None:
        if not math.isfinite(reward):
            return f"its reward {reward} is not finite"
        if reward_range is not None and not reward_range[0] <= reward <= reward_range[1]:
            return f"its reward {reward} lies outside reward_range [{reward_range[0]}, {reward_range[1]}]"
    return None


def _field(state: Any, name: str) -> Any:
    return state.get(name) if isinstance(state, dict) else getattr(state, name, None)


def _after_done(result: Any, ended: Any, now: Any) -> str:
    """What an accepted step after the end did; ``CheckFailed`` when it silently un-ended the episode.

    ``done=True`` keeps the episode ended. ``done=False`` is fine only when the state shows a new
    episode: another ``episode_id``, or a ``step_count`` below the finished episode's. The same
    episode still counting (or not counting) means the env played on past its end.
    """
    if result.done:
        return "the episode stayed ended (done=True)"
    same_episode = _field(now, "episode_id") == _field(ended, "episode_id")
    count, before = _field(now, "step_count"), _field(ended, "step_count")
    restarted = isinstance(count, int) and isinstance(before, int) and count < before
    if same_episode and not restarted:
        raise CheckFailed(
            f"a step after done=True returned done=False in the same episode (episode_id "
            f"{_field(now, 'episode_id')!r}, step_count {before} -> {count}): the env played on past its end",
            "Refuse a step after the end (raise: \"the episode is over: call reset()\"), keep answering "
            "done=True, or start a new episode visibly (new episode_id, step_count from 1).")
    return f"it started a new episode (episode_id {_field(now, 'episode_id')!r}, step_count {count})"


def wire_checks(report: Report, url: str, *, reward_range: tuple[float, float] | None,
                max_steps: int = 50, volatile: frozenset[str] = frozenset(),
                observation_types: tuple[type[BaseModel], ...] = ()) -> None:
    """Health, schema, an episode, seeded reset, bad-order steps, and two independent sessions.

    ``observation_types`` (known when the env is served in this process) check the observations of
    accepted out-of-order steps in full; at a URL only the fields ``/schema`` requires are checked.
    """
    from openenv.cli.run_cmd import Policy
    from openenv.client import GenericEnvClient
    from openenv.errors import OpenEnvError

    def health() -> str:
        try:
            _get_json(url, "/health")
        except Exception as exc:
            raise CheckFailed(f"GET {url}/health failed: {exc}",
                              "Start the server (`openenv serve NAME`) and pass its root URL.") from None
        return "GET /health answered"

    if not report.run("health", health):
        for name in _WIRE[1:]:
            report.run(name, _unreachable)
        return
    schema: dict[str, Any] = {}
    obs_schema: dict[str, Any] = {}

    def get_schema() -> str:
        doc = _get_json(url, "/schema")
        action = doc.get("action") if isinstance(doc, dict) else None
        if not isinstance(action, dict):
            raise CheckFailed(f"GET /schema has no action schema: {str(doc)[:200]}",
                              "Serve the env with openenv's create_app (it publishes /schema).")
        schema.update(action)
        observation = doc.get("observation")
        if isinstance(observation, dict):
            obs_schema.update(observation)
        return f"action schema with {len(action.get('properties', {}))} field(s)"

    report.run("schema", get_schema)

    def run(coro: Any) -> Any:
        return asyncio.run(coro)

    rewards: list[float] = []

    async def play(seed: int) -> tuple[list[Any], bool]:
        policy = Policy("random", schema, seed)
        seen: list[Any] = []
        async with GenericEnvClient(url) as env:
            result = await env.reset(seed=seed)
            seen.append(result.observation)
            for _ in range(max_steps):
                result = await env.step(policy.act(result.observation))
                seen.append(result.observation)
                rewards.append(float(result.reward) if result.reward is not None else 0.0)
                if result.done:
                    return seen, True
        return seen, False

    def reset_step() -> str:
        if not schema:
            raise NotApplicable("no action schema (see schema)")
        seen, done = run(play(0))
        return f"{len(seen) - 1} steps over the wire, {'ended' if done else f'stopped after {max_steps}'}"

    report.run("reset_step", reset_step)

    def reward_wire() -> str:
        if not rewards:
            raise NotApplicable("no step was played over the wire (see reset_step)")
        bad = [r for r in rewards if not math.isfinite(r)]
        if bad:
            raise CheckFailed(f"non-finite rewards {bad[:3]}", "Return finite float rewards.")
        if reward_range is None:
            return f"{len(rewards)} finite rewards (no declared range to compare with at a URL)"
        low, high = reward_range
        out = [r for r in rewards if not low <= r <= high]
        if out:
            raise CheckFailed(f"rewards {out[:5]} outside [{low}, {high}]", "Widen reward_range or fix the reward.")
        return f"{len(rewards)} rewards in [{low}, {high}]"

    report.run("reward_in_range_wire", reward_wire)

    async def first_obs(seed: int) -> Any:
        async with GenericEnvClient(url) as env:
            return (await env.reset(seed=seed)).observation

    def seeded_reset() -> str:
        a, b = run(first_obs(3)), run(first_obs(3))
        if without_fields(a, volatile) != without_fields(b, volatile):
            raise CheckFailed("two sessions reset with seed 3 got different first observations",
                              "Seed every random choice of reset from random.Random(seed); list fields "
                              "that legitimately vary in the manifest's volatile_fields.")
        return "same seed, same first observation"

    report.run("seeded_reset", seeded_reset)

    async def bad_order(after_done: bool) -> str:
        policy = Policy("random", schema, 1)
        async with GenericEnvClient(url) as env:
            ended: Any = None
            if after_done:
                result = await env.reset(seed=1)
                for _ in range(max_steps):
                    result = await env.step(policy.act(result.observation))
                    if result.done:
                        break
                else:
                    raise NotApplicable(f"no random episode ended within {max_steps} steps")
                ended = await env.state()
            try:
                result = await env.step(policy.act({}))
            except OpenEnvError as exc:
                if _NOT_AN_OBSERVATION in exc.message:
                    raise CheckFailed(f"step returned something other than an observation ({exc.message})",
                                      "Return an instance of the declared observation type, or raise to "
                                      "refuse the step.") from None
                outcome = f"refused with a structured error ({type(exc).__name__}: {str(exc)[:80]})"
            else:
                problem = _malformed(result, observation_types, obs_schema, reward_range)
                if problem:
                    raise CheckFailed(f"the step was accepted but {problem}",
                                      "Refuse the step (raise: \"call reset() first\"), or return a valid "
                                      "observation with a reward inside reward_range.")
                outcome = "accepted, " + (_after_done(result, ended, await env.state()) if after_done
                                          else "with a valid observation and reward")
            await env.reset(seed=2)  # the session must still serve
        return outcome + "; the session kept serving"

    def structured(after_done: bool) -> Callable[[], str]:
        def check() -> str:
            if not schema:
                raise NotApplicable("no action schema (see schema)")
            try:
                return str(run(bad_order(after_done)))
            except (NotApplicable, CheckFailed):
                raise
            except Exception as exc:
                raise CheckFailed(f"the session broke: {type(exc).__name__}: {exc}",
                                  "A step out of order must get a structured error (raise in step; the "
                                  "server reports it), never end the connection.") from None
        return check

    report.run("step_before_reset", structured(False))
    report.run("step_after_done", structured(True))

    async def two_sessions() -> str:
        """Interleaved: A, B, A steps (each reset with the same seed); A must count 2 and B 1."""
        policy = Policy("random", schema, 5)
        async with GenericEnvClient(url) as a, GenericEnvClient(url) as b:
            ra, rb = await a.reset(seed=4), await b.reset(seed=4)
            taken = {"A": 0, "B": 0}
            for who in ("A", "B", "A"):
                client, last = (a, ra) if who == "A" else (b, rb)
                if last.done:
                    continue
                result = await client.step(policy.act(last.observation))
                taken[who] += 1
                if who == "A":
                    ra = result
                else:
                    rb = result
            sa, sb = await a.state(), await b.state()
        count_a = sa.get("step_count") if isinstance(sa, dict) else getattr(sa, "step_count", None)
        count_b = sb.get("step_count") if isinstance(sb, dict) else getattr(sb, "step_count", None)
        if (count_a, count_b) != (taken["A"], taken["B"]):
            raise CheckFailed(f"after interleaved steps (A {taken['A']}, B {taken['B']}), step_count is "
                              f"A={count_a}, B={count_b}",
                              "Keep all episode state on the instance (no module-level state), or do not "
                              "declare SUPPORTS_CONCURRENT_SESSIONS.")
        return f"interleaved sessions kept their own state (A at step {count_a}, B at step {count_b})"

    def parallel() -> str:
        if not schema:
            raise NotApplicable("no action schema (see schema)")
        try:
            return str(run(two_sessions()))
        except OpenEnvError as exc:
            if "capacity" in type(exc).__name__.lower() or "Capacity" in str(exc):
                raise NotApplicable(f"the server holds one session at a time ({exc})") from None
            raise

    report.run("parallel_sessions", parallel)


def _observation_types(cls: Any) -> tuple[type[BaseModel], ...]:
    """What a step of ``cls`` may return: its observation type, and a tool env's tool results."""
    from openenv.tools import ToolEnvironment
    from openenv.tools.wire import CallToolObservation, ListToolsObservation

    declared = getattr(cls, "observation_type", None)
    kinds: tuple[type[BaseModel], ...] = (declared,) if isinstance(declared, type) else ()
    if isinstance(cls, type) and issubclass(cls, ToolEnvironment):
        kinds += (CallToolObservation, ListToolsObservation)
    return kinds


def served_checks(report: Report, env: Any, *, reward_range: tuple[float, float] | None,
                  max_steps: int, volatile: frozenset[str] = frozenset()) -> None:
    """Serve ``env`` on 127.0.0.1 in this process, run the wire checks, and check ``close`` is called."""
    from openenv.env import Environment, env_class_of, env_traits
    from openenv.testing import live_server

    closed: list[int] = []
    created: list[int] = []
    lock = threading.Lock()

    def factory() -> Any:
        instance = env()
        with lock:
            created.append(id(instance))
        original = instance.close

        def close() -> None:
            with lock:
                closed.append(id(instance))
            original()

        instance.close = close
        original_async = getattr(instance, "close_async", None)
        if callable(original_async) and type(instance).close is Environment.close:
            # No close() of its own to reach: the server's close_async() is the env's close.
            async def close_async() -> None:
                with lock:
                    closed.append(id(instance))
                await original_async()

            instance.close_async = close_async
        return instance

    factory.__annotations__ = {"return": env_class_of(env)}  # the env class, for the server's rules
    concurrent = env_traits(env)["SUPPORTS_CONCURRENT_SESSIONS"]
    try:
        server_cm = live_server(factory, max_sessions=4 if concurrent else 1)
        server = server_cm.__enter__()
    except Exception as exc:
        problem = CheckFailed(f"the env could not be served: {type(exc).__name__}: {exc}", "Fix the rule named above.")

        def serve() -> str:
            raise problem

        report.run("serve", serve)
        return
    try:
        wire_checks(report, server.url, reward_range=reward_range, max_steps=max_steps, volatile=volatile,
                    observation_types=_observation_types(env_class_of(env)))
    finally:
        server_cm.__exit__(None, None, None)

    def close_called() -> str:
        if not created:
            raise NotApplicable("the server created no env")
        missing = set(created) - set(closed)
        if missing:
            raise CheckFailed(f"{len(missing)} of {len(created)} env instance(s) were not closed when their "
                              "session ended", "Let the server's close reach your close(): an async env's "
                              "close_async() must call self.close(); never replace or swallow close().")
        return f"close called on all {len(created)} env instance(s)"

    report.run("close_called", close_called)
