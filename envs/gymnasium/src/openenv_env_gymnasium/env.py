"""Any registered Gymnasium env id, served as an OpenEnv env.

Promises (tested):

* ``reset(env_id="FrozenLake-v1", make_kwargs={...})`` makes the env with ``gymnasium.make`` (kept
  while the id and kwargs stay the same); the default id comes from the constructor, else from the
  ``OPENENV_GYMNASIUM_ENV_ID`` variable, else ``FrozenLake-v1``. Third-party ids work once
  registered; ``"package.module:EnvId-v0"`` imports the module first (it registers the id). An unknown id is a
  ``ValidationError`` with a did-you-mean; an env whose extra dependency is missing (Box2D, MuJoCo,
  jax for ``phys2d/*``, gymnasium-robotics for the ``-v2``/``-v3`` MuJoCo ids, shimmy for
  ``GymV2*``) is a ``ValidationError`` carrying the missing module or Gymnasium's install hint;
* actions are JSON checked against the action space (``Discrete``, ``Box``, ``MultiDiscrete``,
  ``MultiBinary``, ``Dict``, ``Tuple``); one outside it is a ``ValidationError`` saying what fits;
* observations and info are JSON; ``terminated`` and ``truncated`` are kept (fields and metadata),
  ``done`` is either; ``legal_actions`` lists the allowed actions of a ``Discrete`` space (honouring
  an ``action_mask`` in info) or a few seeded samples of any other space;
* ``reset(render=True)`` adds a render to every observation: the env's text (``ansi``) when it has
  one, else its image (``rgb_array``) as a PNG data URL; ``render="ansi"``/``"rgb_array"`` picks one.
  An env with neither, or whose renderer needs a missing package (pygame for the classic-control
  images), is a ``ValidationError`` naming the fix;
* ``reset(seed=k)`` seeds the env and the action samples: same seed, same episode;
* stepping before ``reset`` or after the end is an ``ExecutionError`` telling you to reset.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499)
  are seeds of the env id the server plays; they arrive as ``reset(task=<openenv.tasks.Task>)``.
"""

from __future__ import annotations

import importlib
import os
import uuid
import warnings
from typing import Any

import gymnasium
import numpy as np

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError, did_you_mean
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata, Image
from openenv_env_gymnasium.models import GymAction, GymObservation, GymState
from openenv_env_gymnasium.render import checked, choose_mode, png_image
from openenv_env_gymnasium.spaces import SpaceError, describe, from_json, to_json

__all__ = ["DEFAULT_ENV_ID", "ENV_VAR", "GymnasiumEnv", "make_env"]

ENV_VAR = "OPENENV_GYMNASIUM_ENV_ID"
DEFAULT_ENV_ID = "FrozenLake-v1"
#: Discrete spaces up to this size list every action in ``legal_actions``.
_MAX_LISTED = 64
_SAMPLES = 4


def make_env(env_id: str, make_kwargs: dict[str, Any] | None = None, render: bool | str = False) -> Any:
    """``gymnasium.make`` with its failures turned into ``ValidationError`` messages; ``render`` as in
    ``reset`` (``True`` picks ``ansi``, else ``rgb_array``)."""
    if ":" in env_id:  # "module:EnvId": gymnasium.make imports the module, which registers the id
        module = env_id.split(":", 1)[0]
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValidationError(f"cannot import {module!r} for env id {env_id!r}: {exc}") from None
        env_id = env_id.split(":", 1)[1]
    if env_id not in gymnasium.registry:
        raise ValidationError(f"unknown Gymnasium env id {env_id!r}.{did_you_mean(env_id, gymnasium.registry)} "
                              "Registered ids: gymnasium.registry (e.g. FrozenLake-v1, Taxi-v4, Blackjack-v1, "
                              "CartPole-v1)")
    kwargs = dict(make_kwargs or {})
    mode = None
    if render:
        modes = _render_modes(env_id)
        if modes is None:  # a factory entry point: its env says, once made (a missing module fails here)
            probe = _make(env_id, kwargs)
            modes = list(probe.metadata.get("render_modes", []))
            probe.close()
        mode = choose_mode(env_id, render, modes)
    if mode is not None:
        kwargs["render_mode"] = mode
    return _make(env_id, kwargs)


def _make(env_id: str, kwargs: dict[str, Any]) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return gymnasium.make(env_id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        raise ValidationError(f"{env_id} needs a package that is not installed: {exc}") from None
    except ImportError as exc:
        raise _missing_module(env_id, exc) from None
    except (gymnasium.error.Error, TypeError, ValueError) as exc:
        raise ValidationError(f"cannot make {env_id} with {kwargs}: {exc}") from None


def _missing_module(env_id: str, exc: ImportError) -> ValidationError:
    # A ModuleNotFoundError names the module (jax for phys2d/*); Gymnasium's own ImportErrors (mujoco
    # -v2/-v3 ids, the shimmy-backed GymV2* ids) carry their fix in the message instead.
    what = f"it needs the module {exc.name!r}, which is not installed: install it." if exc.name else str(exc)
    return ValidationError(f"{env_id} cannot be made here: {what} Or pick another id (e.g. FrozenLake-v1, "
                           "CartPole-v1).")


def _render_modes(env_id: str) -> list[str] | None:
    """The render modes its env class declares; None when the entry point is a factory function."""
    entry = gymnasium.registry[env_id].entry_point
    try:
        if isinstance(entry, str):
            module, _, name = entry.partition(":")
            cls = getattr(importlib.import_module(module), name)
        else:
            cls = entry
    except ImportError as exc:
        raise _missing_module(env_id, exc) from None
    except gymnasium.error.DependencyNotInstalled as exc:
        raise ValidationError(f"{env_id} needs a package that is not installed: {exc}") from None
    if not isinstance(cls, type):
        return None
    return list(getattr(cls, "metadata", {}).get("render_modes", []))


class GymnasiumEnv(Environment[GymAction, GymObservation, GymState]):
    """One Gymnasium env per session (made on reset). Instances share nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str | None = None, *, make_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.default_env_id = env_id or os.environ.get(ENV_VAR) or DEFAULT_ENV_ID
        self.default_make_kwargs = dict(make_kwargs or {})
        self._env: Any = None
        self._key: tuple[Any, ...] | None = None
        self._env_id = self.default_env_id
        self._render: bool | str = False
        self._done = False
        self._started = False
        self._steps = 0
        self._total = 0.0
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GymObservation:
        """Start an episode. Keyword options: ``env_id``, ``make_kwargs`` (for gymnasium.make), ``render``,
        ``options`` (passed to the env's reset)."""
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = set(kwargs) - {"env_id", "make_kwargs", "render", "options"}
        if unknown:
            raise ValidationError(f"unknown reset option(s) {sorted(unknown)}; accepted: env_id, make_kwargs, "
                                  "render, options")
        env_id = str(kwargs.get("env_id", self.default_env_id))
        make_kwargs = kwargs.get("make_kwargs", self.default_make_kwargs)
        if not isinstance(make_kwargs, dict):
            raise ValidationError(f"make_kwargs must be a mapping, got {type(make_kwargs).__name__}")
        render = checked(kwargs.get("render", False))
        key = (env_id, repr(sorted(make_kwargs.items())), render)
        if key != self._key:
            env = make_env(env_id, make_kwargs, render)
            self.close()
            self._env, self._key = env, key
        spec = getattr(self._env, "spec", None)
        self._env_id, self._render = (spec.id if spec is not None else env_id), render
        try:
            obs, info = self._env.reset(seed=seed, options=kwargs.get("options"))
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"{env_id}.reset refused the options: {exc}") from None
        self._env.action_space.seed(seed)
        self._done, self._started, self._steps, self._total = False, True, 0, 0.0
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(obs, 0.0, False, False, info, spaces=True)

    def step(self, action: GymAction, timeout_s: float | None = None, **kwargs: Any) -> GymObservation:
        if not self._started:
            raise ExecutionError("No episode in progress: call reset() before step().")
        if self._done:
            raise ExecutionError("The episode is over (terminated or truncated): call reset().")
        try:
            value = from_json(self._env.action_space, action.action)
        except SpaceError as exc:
            raise ValidationError(
                str(exc), data={"errors": [{"loc": ["action"], "msg": str(exc), "type": "gymnasium_space",
                                            "input": action.action}],
                                "action_space": describe(self._env.action_space)},
            ) from None
        obs, reward, terminated, truncated, info = self._env.step(value)
        self._steps += 1
        self._total += float(reward)
        self._done = bool(terminated or truncated)
        return self._observe(obs, float(reward), bool(terminated), bool(truncated), info)

    @property
    def state(self) -> GymState:
        return GymState(episode_id=self._episode_id, step_count=self._steps, env_id=self._env_id,
                        total_reward=self._total, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="gymnasium", version="0.1.0",
                                   description="Any registered Gymnasium env id (reset env_id=...).")

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env, self._key = None, None

    def legal_actions(self, info: dict[str, Any] | None = None) -> list[Any]:
        if self._done or self._env is None:
            return []
        space = self._env.action_space
        if isinstance(space, gymnasium.spaces.Discrete) and space.n <= _MAX_LISTED:
            actions = range(int(space.start), int(space.start + space.n))
            mask = (info or {}).get("action_mask")
            if mask is not None and len(mask) == space.n and np.any(mask):
                return [a for a, ok in zip(actions, mask, strict=True) if ok]
            return list(actions)
        return [to_json(space.sample()) for _ in range(_SAMPLES)]

    def _observe(self, obs: Any, reward: float, terminated: bool, truncated: bool, info: dict[str, Any],
                 spaces: bool = False) -> GymObservation:
        env = self._env
        return GymObservation(
            env_id=self._env_id, observation=to_json(obs), terminated=terminated, truncated=truncated,
            info=to_json(info), legal_actions=self.legal_actions(info),
            render=self._rendered() if self._render else None,
            action_space=describe(env.action_space) if spaces else None,
            observation_space=describe(env.observation_space) if spaces else None,
            reward=reward, done=self._done,
            metadata={"terminated": terminated, "truncated": truncated, "step": self._steps},
        )

    def _rendered(self) -> Image | str:
        try:
            frame = self._env.render()
        except gymnasium.error.DependencyNotInstalled as exc:
            raise ValidationError(f"{self._env_id} cannot render here: {exc} (pygame-ce also works: it is the "
                                  "openenvkit-env-gymnasium[classic-control] extra). Or reset with "
                                  "render=False.") from None
        if isinstance(frame, str):
            return frame
        return png_image(frame)
