"""MuJoCo continuous control: Gymnasium's v5 MuJoCo tasks, served as an OpenEnv env.

Dynamics (all promises are tested):

* ``reset(seed=k, env_id="InvertedPendulum-v5", max_steps=None, image=False, image_size=128,
  image_effects=False)``
  makes the task with Gymnasium (kept while the id stays the same) and resets it with seed ``k``:
  the seed draws the initial state's noise and the physics is deterministic, so same seed and
  actions give the same episode. ``env_id`` is any of ``ENV_IDS`` (did-you-mean on a typo);
  ``max_steps`` defaults to the task's own time limit (1 000 steps for most, 50 for Reacher, 100
  for Pusher);
* an action is one number per actuator (``action_names``) inside ``[action_low, action_high]``;
  a vector of another length, a number out of bounds or not finite is refused with
  ``ValidationError`` naming the length and bounds, and the episode goes on. ``legal_actions``
  lists a few valid ones (zeros and seeded random vectors) for policies that pick from a list;
* the reward is the task's own (forward progress, alive bonus, control cost, ... as Gymnasium's
  v5 tasks define it); its parts come in ``info``;
* the episode ends (``done``) when the task terminates (the pendulum falls, the hopper falls
  over) or is truncated after ``max_steps`` steps;
* observations carry the task's state vector and, with ``image=True``, the scene rendered
  offscreen (MuJoCo's own renderer through EGL, or OSMesa, no display needed) as a PNG data URL,
  without shadows and reflections unless ``image_effects=True`` (they cost most of a software frame);
  where no offscreen OpenGL works, ``image=True`` is refused saying so, vectors still work;
* the declared tasks (``MujocoEnv.tasks``) are (task, seed) pairs for the tasks of
  ``CONTROL_TASKS``: seeds 0..19 train and 1 000 000..1 000 009 test for each;
  ``reset(task=...)`` plays exactly that task and seed.
"""

from __future__ import annotations

import base64
import io
import math
import os
import secrets
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from openenv.env import Environment
from openenv.errors import ValidationError, did_you_mean, int_option
from openenv.tasks import InlineTasks, Task, merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_mujoco.models import MujocoAction, MujocoObservation, MujocoState

__all__ = ["CONTROL_TASKS", "DEFAULT_ENV_ID", "ENV_IDS", "MujocoEnv"]

DEFAULT_ENV_ID = "InvertedPendulum-v5"
#: The tasks declared as (task, seed) pairs: short name -> Gymnasium id.
CONTROL_TASKS: dict[str, str] = {
    "inverted_pendulum": "InvertedPendulum-v5",
    "inverted_double_pendulum": "InvertedDoublePendulum-v5",
    "reacher": "Reacher-v5",
    "pusher": "Pusher-v5",
    "swimmer": "Swimmer-v5",
    "hopper": "Hopper-v5",
    "half_cheetah": "HalfCheetah-v5",
    "walker2d": "Walker2d-v5",
    "ant": "Ant-v5",
}
#: Every id ``reset(env_id=...)`` accepts: the declared tasks and the two humanoids (348 and 348
#: numbers of observation, 17 actuators: playable, too slow to list as tasks).
ENV_IDS: tuple[str, ...] = (*CONTROL_TASKS.values(), "Humanoid-v5", "HumanoidStandup-v5")
_TRAIN_SEEDS = range(0, 20)
_TEST_SEEDS = range(1_000_000, 1_000_010)
#: Random vectors listed in ``legal_actions`` besides all zeros.
_SAMPLES = 4
_OPTIONS = {"env_id", "max_steps", "image", "image_size", "image_effects"}
# Gymnasium's v5 tasks size their offscreen buffer to 480 x 480 by default; larger needs a rebuild.
_MAX_IMAGE = 480
_T = TypeVar("_T")


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of



def _tasks() -> InlineTasks:
    rows = [{"id": f"{name}-{split}-{seed}", "split": split, "seed": seed, "env_id": env_id}
            for name, env_id in CONTROL_TASKS.items()
            for split, seeds in (("train", _TRAIN_SEEDS), ("test", _TEST_SEEDS)) for seed in seeds]
    return InlineTasks(rows, name="mujoco control tasks x seeds")


def _prefer_headless_gl() -> None:
    """Pick EGL for MuJoCo's offscreen renderer when nothing else was chosen and no display exists.

    MuJoCo reads ``MUJOCO_GL`` once, when it is first imported; without it, it tries GLFW, which
    needs a display. A choice already made (``MUJOCO_GL=osmesa``) is kept.
    """
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"


class MujocoEnv(Environment[MujocoAction, MujocoObservation, MujocoState]):
    """One MuJoCo model and data per instance; instances share nothing, so sessions run concurrently."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # A physics step is tens of microseconds, but an image step renders and encodes a PNG.
    BLOCKING = True
    tasks = _tasks()

    def __init__(self) -> None:
        super().__init__()
        self._gym: Any = None
        self._env_id = DEFAULT_ENV_ID
        self._renderer: Any = None
        self._painter: ThreadPoolExecutor | None = None
        self._camera: Any = None
        self._seed: int | None = None
        self._limit: int | None = None
        self._max_steps = 1000
        self._image = False
        self._image_size = 128
        self._effects = False
        self._low = np.zeros(0)
        self._high = np.zeros(0)
        self._names: list[str] = []
        self._steps = 0
        self._return = 0.0
        self._done = False
        self._episode_id: str | None = None
        self._samples = np.random.default_rng(0)

    # -- protocol ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> MujocoObservation:
        # a declared task: its id and seed make the episode
        seed, kwargs = merge_task(task, seed, kwargs)
        unknown = sorted(set(kwargs) - _OPTIONS)
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; the MuJoCo env accepts {sorted(_OPTIONS)}",
                          kind="unknown_option", loc=unknown[0])
        env_id = kwargs.get("env_id", DEFAULT_ENV_ID)
        if env_id not in ENV_IDS:
            by_name = CONTROL_TASKS.get(str(env_id).lower())
            hint = (f" Did you mean '{by_name}'?" if by_name else did_you_mean(str(env_id), ENV_IDS)) or (
                f" The MuJoCo env plays {list(ENV_IDS)}.")
            raise _refuse(f"unknown env_id {env_id!r}.{hint}", kind="unknown_env_id", loc="env_id", value=env_id)
        image = kwargs.get("image", False)
        if not isinstance(image, bool):
            raise _refuse(f"image must be true or false, got {image!r}", kind="bad_image", loc="image", value=image)
        image_size = int_option(kwargs, "image_size", 128, 16, _MAX_IMAGE)
        effects = kwargs.get("image_effects", False)
        if not isinstance(effects, bool):
            raise _refuse(f"image_effects must be true or false, got {effects!r}", kind="bad_image_effects",
                          loc="image_effects", value=effects)
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise _refuse(f"seed must be a non-negative integer, got {seed!r}", kind="bad_seed", loc="seed",
                          value=seed)

        if self._gym is None or self._env_id != env_id:
            self._make(env_id)
        self._max_steps = int_option(kwargs, "max_steps", self._limit or 1000, 1, 1_000_000)
        if image:
            self._open_renderer(image_size)
        self._image, self._image_size, self._effects = image, image_size, effects
        # Without a seed, draw one so that state() can still report it (and the episode be replayed).
        self._seed = seed if seed is not None else secrets.randbelow(2**31)
        vector, info = self._gym.reset(seed=self._seed)
        self._samples = np.random.default_rng(self._seed)
        self._steps, self._return, self._done = 0, 0.0, False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(vector, info, reward=0.0, terminated=False, truncated=False)

    def step(self, action: MujocoAction, timeout_s: float | None = None, **kwargs: Any) -> MujocoObservation:
        if self._gym is None:
            raise _refuse("No episode in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (the task terminated or max_steps): call reset().",
                          kind="episode_over")
        control = self._checked(action.action)
        vector, reward, terminated, _, info = self._gym.step(control)
        self._steps += 1
        self._return += float(reward)
        truncated = not terminated and self._steps >= self._max_steps
        self._done = bool(terminated) or truncated
        return self._observe(vector, info, reward=float(reward), terminated=bool(terminated), truncated=truncated,
                             metadata={"step": self._steps})

    @property
    def state(self) -> MujocoState:
        return MujocoState(episode_id=self._episode_id, step_count=self._steps, env_id=self._env_id, seed=self._seed,
                           episode_return=self._return, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="mujoco",
            description="MuJoCo continuous control (Gymnasium's v5 tasks): reset(env_id='Hopper-v5', image=True); "
            "an action is one number per actuator within the bounds; the reward is the task's own.",
            version="0.1.0",
        )

    def close(self) -> None:
        self._close_renderer()
        if self._painter is not None:
            self._painter.shutdown(wait=True)
            self._painter = None
        if self._gym is not None:
            self._gym.close()
            self._gym = None

    # -- helpers ----------------------------------------------------------------------------------

    def _make(self, env_id: str) -> None:
        self._close_renderer()  # it holds the previous task's model
        if self._gym is not None:
            self._gym.close()
            self._gym = None
        _prefer_headless_gl()
        import gymnasium
        import mujoco

        # The unwrapped task: truncation is counted here (max_steps), and the env checker's warnings
        # about float64 observations would repeat on every make.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            made = gymnasium.make(env_id, disable_env_checker=True)
        self._gym, self._env_id = made.unwrapped, env_id
        # The time limit lives on the wrapper's spec (the unwrapped task's says None).
        self._limit = made.spec.max_episode_steps if made.spec is not None else None
        space = self._gym.action_space
        self._low, self._high = np.asarray(space.low, dtype=np.float64), np.asarray(space.high, dtype=np.float64)
        self._names = [_actuator_name(mujoco, self._gym.model, i) for i in range(self._gym.model.nu)]

    def _paint(self, work: Callable[[], _T]) -> _T:
        """Run ``work`` on this env's own render thread.

        An OpenGL context is current in one thread at a time, and MuJoCo's renderer leaves its
        context current in the thread that last used it; the server may step a session on another
        thread than the one that reset it (EGL then refuses with EGL_BAD_ACCESS). Creating, using
        and closing the renderer always in the same thread avoids that, for every backend.
        """
        if self._painter is None:
            self._painter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mujoco-render")
        return self._painter.submit(work).result()

    def _close_renderer(self) -> None:
        renderer, self._renderer = self._renderer, None
        if renderer is not None:
            self._paint(renderer.close)

    def _open_renderer(self, size: int) -> None:
        """MuJoCo's offscreen renderer at ``size`` x ``size`` (kept while the size stays), with the task's camera."""
        if self._renderer is not None and self._renderer.width == size:
            return
        import mujoco

        self._close_renderer()
        model = self._gym.model
        try:
            self._renderer = self._paint(lambda: mujoco.Renderer(model, size, size))
        except Exception as exc:  # no EGL/OSMesa library, no GPU driver, a display-only backend
            raise _refuse(
                f"offscreen rendering is not available here ({type(exc).__name__}: {exc}); set MUJOCO_GL=egl (needs "
                "libEGL, e.g. Debian's libegl1) or MUJOCO_GL=osmesa (libosmesa6) before starting, or reset with "
                "image=False for vector observations", kind="no_renderer", loc="image", value=True) from None
        self._camera = _task_camera(self._gym)

    def _checked(self, values: list[float]) -> np.ndarray:
        """The action as an array, refused unless it has one finite number per actuator inside the bounds."""
        bounds = f"{len(self._names)} numbers, one per actuator {self._names}, each within " \
                 f"[{_fmt(self._low)}, {_fmt(self._high)}]"
        if len(values) != len(self._names):
            raise _refuse(f"{self._env_id} takes {bounds}; got {len(values)} number(s)", kind="bad_action_shape",
                          loc="action", value=values)
        if not all(math.isfinite(v) for v in values):
            raise _refuse(f"every action number must be finite, got {values}; send {bounds}",
                          kind="non_finite_action", loc="action", value=values)
        control = np.asarray(values, dtype=np.float64)
        outside = [i for i in range(len(values)) if not self._low[i] <= control[i] <= self._high[i]]
        if outside:
            i = outside[0]
            raise _refuse(f"action[{i}] ({self._names[i]}) = {values[i]} is outside [{self._low[i]:g}, "
                          f"{self._high[i]:g}]; clip it (numpy.clip(action, action_low, action_high)). "
                          f"{self._env_id} takes {bounds}", kind="action_out_of_bounds", loc="action", value=values)
        return control

    def _examples(self) -> list[list[float]]:
        """All zeros (inside every task's bounds), then ``_SAMPLES`` seeded random vectors within the bounds."""
        drawn = self._samples.uniform(self._low, self._high, size=(_SAMPLES, self._low.size))
        # Rounded for a compact observation; rounding a number inside [low, high] to 4 places stays inside
        # for these bounds (themselves short decimals), and np.clip makes sure of it.
        rounded = np.clip(np.round(drawn, 4), self._low, self._high)
        return [[0.0] * self._low.size, *rounded.tolist()]

    def _observe(self, vector: Any, info: dict[str, Any], *, reward: float, terminated: bool, truncated: bool,
                 metadata: dict[str, Any] | None = None) -> MujocoObservation:
        image = None
        if self._image:
            import mujoco

            renderer, data, camera, effects = self._renderer, self._gym.data, self._camera, self._effects

            def draw() -> np.ndarray:
                renderer.update_scene(data, camera=camera)
                # Shadows and the floor's reflection cost ~14x the frame in software OpenGL (Mesa's
                # llvmpipe, the usual headless EGL): off unless asked for.
                renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = effects
                renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = effects
                return renderer.render()  # type: ignore[no-any-return]

            image = _png_data_url(self._paint(draw))
        return MujocoObservation(
            env_id=self._env_id, observation=np.asarray(vector, dtype=np.float64).tolist(),
            action_names=self._names, action_low=self._low.tolist(), action_high=self._high.tolist(),
            legal_actions=[] if self._done else self._examples(), image=image, info=_scalars(info),
            episode_return=self._return, steps_left=self._max_steps - self._steps,
            terminated=terminated, truncated=truncated, reward=reward, done=self._done, metadata=metadata or {},
        )


def _actuator_name(mujoco: Any, model: Any, index: int) -> str:
    """The actuator's name; most of Gymnasium's models leave motors unnamed, so else the joint it drives."""
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, index)
    if not name and model.actuator_trntype[index] == mujoco.mjtTrn.mjTRN_JOINT:
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[index, 0]))
    return str(name or f"actuator{index}")


def _task_camera(task: Any) -> Any:
    """A free camera framing the whole model, then the task's own camera settings (Gymnasium's
    ``default_camera_config``: distance, elevation, the body to track, ...)."""
    import mujoco

    camera = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(task.model, camera)
    config = getattr(getattr(task, "mujoco_renderer", None), "default_cam_config", None) or {}
    for key, value in config.items():
        if key == "lookat":
            camera.lookat[:] = np.asarray(value, dtype=np.float64)
        elif hasattr(camera, key):
            setattr(camera, key, value)
    if config.get("trackbodyid", -1) not in (-1, None):
        camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING  # follow the runner, as Gymnasium's render does
    return camera


def _scalars(info: dict[str, Any]) -> dict[str, float]:
    """The info entries that are finite numbers (reward parts, positions); arrays are left out."""
    out: dict[str, float] = {}
    for key, value in info.items():
        if isinstance(value, int | float | np.floating | np.integer) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                out[str(key)] = number
    return out


def _fmt(values: np.ndarray) -> str:
    return f"{values.min():g}" if values.size and np.all(values == values.flat[0]) else str(values.tolist())


def _png_data_url(rgb: np.ndarray) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.asarray(rgb, dtype=np.uint8), "RGB").save(buffer, "PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
