"""Gymnasium over any OpenEnv env: ``OpenEnvGym`` (a ``gymnasium.Env``) and ``OpenEnvVectorEnv``
(a ``gymnasium.vector.VectorEnv`` with next-step autoreset, the sessions multiplexed over one
connection per server; ``replicas=N`` spreads them over N servers a provider starts).

Install with the extra: ``pip install 'openenvkit-rollouts[gym]'``.

* Spaces come from the env's ``GET /schema`` (table in ``openenv_rollouts.spaces``); an MCP env's
  action space is a ``JSONSpace`` whose values are ``{"type": "call_tool", ...}`` objects.
* ``terminated`` is the env's ``done``; ``truncated`` is the step limit (``max_episode_steps``) or
  an observation that says ``truncated: true``.
* ``info`` holds the observation's ``metadata``, the step's ``reward_components`` and the raw
  reward (``None`` when the env gave none; the reward returned is then ``0.0``).
* ``invalid_action="penalize"`` turns an action the env refuses (a structured ``VALIDATION_ERROR``:
  an illegal move, a word not in the list) into an ordinary step: the previous observation again,
  ``invalid_reward``, not terminated, and ``info["invalid_action"]`` with the env's message. The
  default ``"raise"`` raises the client's ``ValidationError``.
* Fields the env's manifest lists as ``volatile_fields`` (a temp path, a duration) are left out of
  the observation space, so a seeded reset gives the same observation, and out of ``info``'s
  metadata at any depth (a grading report's duration), so a seeded step gives the same info.
* ``register_envs()`` (run on import) registers ``openenv/<name>`` for every installed env:
  ``gymnasium.make("openenv/grid_world", max_episode_steps=50)``.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from openenv.manifest import without_fields
from openenv_rollouts.envinfo import fetch_schema, is_mcp_schema
from openenv_rollouts.spaces import JSONSpace, SpaceMap, space_for

__all__ = ["OpenEnvGym", "OpenEnvVectorEnv", "ToolCallSpace", "register_envs"]


def _components(result: Any) -> dict[str, float]:
    from openenv_rollouts.collect import _components as comps

    return comps(result)


class ToolCallSpace(JSONSpace):
    """The action space of an MCP env: ``{"type": "call_tool", "tool_name": ..., "arguments": {...}}``
    objects; ``sample`` picks a tool and arguments from its input schema."""

    def __init__(self, tools: list[dict[str, Any]], seed: int | None = None) -> None:
        self.tools = tools
        super().__init__({"type": "object"}, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        tool = self.tools[int(self.np_random.integers(len(self.tools)))]
        args = JSONSpace(dict(tool.get("input_schema") or {}))
        args._np_random = self.np_random
        return {"type": "call_tool", "tool_name": tool["name"], "arguments": args.sample() or {}}

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict) and x.get("type") in ("call_tool", "list_tools") and super().contains(x)


class _Connection:
    """A sync client for ``env`` (started through a provider) or ``base_url`` (already served)."""

    def __init__(self, env: str | None, base_url: str | None, provider: str | None, token: str | None,
                 transport: str | None, sessions: int = 1) -> None:
        from openenv.client import GenericEnvClient
        from openenv.client_sync import SyncEnvClient
        from openenv.errors import ConfigError

        if base_url:
            self.client: Any = GenericEnvClient(base_url, token=token, transport=transport).sync()
            url = base_url
        elif env:
            from openenv.interfaces import LaunchSpec

            self.client = SyncEnvClient.from_provider(env, provider, transport=transport,
                                                      launch=LaunchSpec(env=env, max_sessions=sessions))
            url = self.client.base_url
        else:
            raise ConfigError("OpenEnvGym needs an env name (started through a provider) or base_url=.")
        self.schema = fetch_schema(url, token)


def _volatile_fields(env: str | None) -> list[str]:
    """The installed env's manifest ``volatile_fields`` (none for a URL or an env without a manifest)."""
    if not env:
        return []
    from openenv.cli.envs_cmd import env_row
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    try:
        entry = pm.catalog.envs.get(env)
    except Exception:  # an unknown name was already refused by the provider
        return []
    manifest = env_row(entry, pm).get("manifest") or {}
    return [str(f) for f in manifest.get("volatile_fields") or []]


def _without(schema: dict[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """``schema`` (an object schema) without the properties ``fields``."""
    props = schema.get("properties")
    if not fields or not isinstance(props, dict):
        return schema
    out = dict(schema)
    out["properties"] = {k: v for k, v in props.items() if k not in fields}
    if isinstance(schema.get("required"), list):
        out["required"] = [k for k in schema["required"] if k not in fields]
    return out


class OpenEnvGym(gym.Env[Any, Any]):
    """``OpenEnvGym("grid_world")`` or ``OpenEnvGym(base_url="http://127.0.0.1:8000")``."""

    metadata = {"render_modes": []}

    def __init__(self, env: str | None = None, *, base_url: str | None = None, provider: str | None = None,
                 token: str | None = None, transport: str | None = None, max_episode_steps: int = 100,
                 sessions: int = 1, invalid_action: Literal["raise", "penalize"] = "raise",
                 invalid_reward: float = 0.0, volatile_fields: Sequence[str] | None = None) -> None:
        from openenv.errors import ConfigError

        if invalid_action not in ("raise", "penalize"):
            raise ConfigError(f"invalid_action={invalid_action!r}: use 'raise' (the client's ValidationError) "
                              "or 'penalize' (the previous observation, invalid_reward, info['invalid_action']).")
        self.invalid_action = invalid_action
        self.invalid_reward = float(invalid_reward)
        self._conn = _Connection(env, base_url, provider, token, transport, sessions)
        self._client = self._conn.client
        schema = self._conn.schema
        self.env_name = env or base_url
        if is_mcp_schema(schema["action"]):
            self._client.reset()
            listing = self._client.step({"type": "list_tools"}).observation
            tools = [t for t in (listing.get("tools") or []) if isinstance(t, dict)]
            self._action = SpaceMap(ToolCallSpace(tools), lambda v: v, lambda v: v)
        else:
            self._action = space_for(schema["action"])
            fields = getattr(self._action.space, "spaces", None)
            if fields is not None and len(fields) == 1:  # one-field action ({"move": ...}): its space alone
                (name, _), = fields.items()
                whole = self._action
                self._action = SpaceMap(fields[name], lambda v: whole.to_env({name: v}), lambda v: v)
        #: Observation fields left out of the space (the manifest's ``volatile_fields`` by default).
        self.volatile_fields = list(_volatile_fields(env) if volatile_fields is None else volatile_fields)
        self._volatile = frozenset(self.volatile_fields)
        step_schema = _without(schema["observation"], self.volatile_fields)
        self._obs = space_for(step_schema, observation=True)
        self._reset_obs = space_for(_without(schema.get("reset_observation") or schema["observation"],
                                             self.volatile_fields), observation=True)
        self._last: Any = None
        self.action_space = self._action.space
        self.observation_space = self._obs.space
        self.max_episode_steps = max_episode_steps
        self._t = 0
        self._closed = False

    def _observe(self, observation: Any, *, reset: bool = False) -> Any:
        raw = observation if isinstance(observation, dict) else {}
        mapper = self._obs if not reset or self._reset_obs.space == self._obs.space else self._reset_obs
        value = mapper.to_agent(raw)
        if mapper is not self._obs:  # a reset observation of another type: fit it into the step space
            value = self._obs.to_agent({k: v for k, v in raw.items()})
        return value

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        kwargs = dict(options or {})
        if seed is not None:
            kwargs["seed"] = seed
        result = self._client.reset(**kwargs)
        self._t = 0
        obs = result.observation if isinstance(result.observation, dict) else {}
        self._last = self._observe(obs, reset=True)
        return self._last, {"metadata": obs.get("metadata") or {}}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        from openenv.errors import ValidationError

        try:
            result = self._client.step(self._action.to_env(action))
        except ValidationError as exc:
            if self.invalid_action == "raise" or self._last is None:
                raise
            self._t += 1
            refused = {"code": exc.code, "message": str(exc)}
            return (copy.deepcopy(self._last), self.invalid_reward, False, self._t >= self.max_episode_steps,
                    {"metadata": {}, "reward_components": {}, "raw_reward": None, "invalid_action": refused})
        self._t += 1
        obs = result.observation if isinstance(result.observation, dict) else {}
        terminated = bool(result.done)
        truncated = (not terminated and self._t >= self.max_episode_steps) or bool(obs.get("truncated"))
        info = {"metadata": without_fields(obs.get("metadata") or {}, self._volatile),
                "reward_components": _components(result),
                "raw_reward": result.reward}
        self._last = self._observe(obs)
        return self._last, float(result.reward or 0.0), terminated, truncated, info

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()


class OpenEnvVectorEnv(VectorEnv[Any, Any, Any]):
    """``num_envs`` sessions of one env, next-step autoreset: the step after an episode ends resets
    that sub-env and ignores its action. Sessions are multiplexed over one connection per server;
    ``replicas=N`` (an env started through a provider) spreads them over N servers, round robin, and
    steps the servers concurrently."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env: str | None = None, num_envs: int = 4, *, base_url: str | None = None,
                 provider: str | None = None, token: str | None = None, transport: str | None = None,
                 max_episode_steps: int = 100, replicas: int = 1) -> None:
        from openenv.errors import ConfigError

        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= num_envs:
            raise ConfigError(f"replicas must be an integer from 1 to num_envs ({num_envs}), got {replicas!r}.")
        if replicas > 1 and base_url:
            raise ConfigError("replicas= starts servers through a provider; it cannot be combined with base_url= "
                              "(drop base_url, or give env= and provider=).")
        per_server = -(-num_envs // replicas)
        self._single = OpenEnvGym(env, base_url=base_url, provider=provider, token=token, transport=transport,
                                  max_episode_steps=max_episode_steps, sessions=per_server + 1)
        self.num_envs = num_envs
        self.single_action_space = self._single.action_space
        self.single_observation_space = self._single.observation_space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        #: Sub-env i lives in shard i % replicas, as session i // replicas of that shard's vector.
        self._handles: list[Any] = []
        self._clients: list[Any] = []
        self._shards: list[Any] = []
        try:
            self._shards.append(self._single._client.vector(len(range(0, num_envs, replicas))))
            for k in range(1, replicas):
                client = self._start_replica(env, provider, transport, per_server + 1)
                self._shards.append(client.vector(len(range(k, num_envs, replicas))))
        except BaseException:
            self.close_extras()
            raise
        self._pool = ThreadPoolExecutor(max_workers=replicas, thread_name_prefix="openenv-gym") if replicas > 1 \
            else None
        self._t = np.zeros(num_envs, dtype=np.int64)
        self._needs_reset = np.zeros(num_envs, dtype=bool)

    def _start_replica(self, env: str | None, provider: str | None, transport: str | None, sessions: int) -> Any:
        """Another server of ``env`` through the provider, and a blocking client on it."""
        from openenv.client import GenericEnvClient
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        assert env is not None
        pm = get_plugin_manager()
        started = pm.catalog.providers.load(pm.choose_provider(env, provider))()
        handle = started.start(LaunchSpec(env=env, max_sessions=sessions))
        self._handles.append(handle)
        client = GenericEnvClient(handle.base_url, transport=transport).sync()
        self._clients.append(client)
        return client

    def _where(self, index: int) -> tuple[Any, int]:
        replicas = len(self._shards)
        return self._shards[index % replicas], index // replicas

    def _batch(self, items: list[Any]) -> Any:
        out: Any = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, items, out)

    def reset(self, *, seed: int | list[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        results = []
        for i, s in enumerate(seeds):
            shard, local = self._where(i)
            results.append(shard.reset_at(local, **({} if s is None else {"seed": s}), **(options or {})))
        self._t[:] = 0
        self._needs_reset[:] = False
        return self._batch([self._single._observe(r.observation, reset=True) for r in results]), {}

    def _step_live(self, live: list[int], actions: list[Any]) -> dict[int, Any]:
        """Step the live sub-envs, each server's share in one frame, the servers concurrently."""
        by_shard: dict[int, list[tuple[int, int, Any]]] = {}
        for i, action in zip(live, actions, strict=True):
            local = i // len(self._shards)
            by_shard.setdefault(i % len(self._shards), []).append((i, local, action))

        def run(shard: int) -> list[tuple[int, Any]]:
            items = by_shard[shard]
            results = self._shards[shard].step_some([local for _, local, _ in items], [a for *_, a in items])
            return [(i, r) for (i, _, _), r in zip(items, results, strict=True)]

        if self._pool is None or len(by_shard) == 1:
            done = [run(k) for k in by_shard]
        else:
            done = list(self._pool.map(run, list(by_shard)))
        return {i: r for part in done for i, r in part}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        from gymnasium.vector.utils import iterate

        per_env = list(iterate(self.action_space, actions))
        obs: list[Any] = [None] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        live = [i for i in range(self.num_envs) if not self._needs_reset[i]]
        for i in range(self.num_envs):
            if self._needs_reset[i]:
                shard, local = self._where(i)
                obs[i] = self._single._observe(shard.reset_at(local).observation, reset=True)
                self._t[i] = 0
        components: list[dict[str, float]] = [{} for _ in range(self.num_envs)]
        if live:
            results = self._step_live(live, [self._single._action.to_env(per_env[i]) for i in live])
            for i in live:
                result = results[i]
                if isinstance(result, BaseException):
                    raise result
                self._t[i] += 1
                raw = result.observation if isinstance(result.observation, dict) else {}
                obs[i] = self._single._observe(raw)
                rewards[i] = float(result.reward or 0.0)
                terminated[i] = bool(result.done)
                truncated[i] = (not terminated[i] and self._t[i] >= self._single.max_episode_steps) or \
                    bool(raw.get("truncated"))
                components[i] = _components(result)
        self._needs_reset[:] = terminated | truncated
        return self._batch(obs), rewards, terminated, truncated, {"reward_components": components}

    def close_extras(self, **kwargs: Any) -> None:
        for shard in self._shards:
            with contextlib.suppress(Exception):
                shard.close()
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.close()
        for handle in self._handles:
            with contextlib.suppress(Exception):
                handle.stop()
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)
        self._single.close()


def register_envs() -> list[str]:
    """Register ``openenv/<name>`` for every installed env (idempotent); returns the ids."""
    from openenv.plugins import get_plugin_manager

    ids = []
    for entry in get_plugin_manager().catalog.envs:
        env_id = f"openenv/{entry.name}"
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="openenv_rollouts.gym:OpenEnvGym", kwargs={"env": entry.name},
                         disable_env_checker=True)
        ids.append(env_id)
    return ids


register_envs()
