"""Atari 2600 games through ale-py, whose wheel ships the ROMs.

Dynamics (all promises are tested):

* ``reset(seed=k, game="pong", frame_skip=4, sticky_actions=0.25, obs_type="grayscale",
  frame_size=84, image=False, max_steps=27_000)`` loads the game's ROM into a fresh emulator
  seeded with ``k``: same seed, settings and actions, same episode (sticky actions included: they
  draw from the emulator's seeded generator). ``game`` is any ROM ale-py ships (did-you-mean on a
  typo); the declared tasks use Pong, Breakout and Space Invaders;
* an action is held for ``frame_skip`` emulator frames; with probability ``sticky_actions`` the
  emulator repeats the previous action for a frame instead (Machado et al., 2018). The reward is
  the score gained over those frames;
* only the game's minimal action set (``legal_actions``) is accepted; another action is refused
  with ``ValidationError`` naming the legal ones;
* the episode ends (``done``) at game over, or is truncated after ``max_steps`` agent steps;
* observations carry the 128 bytes of RAM, a ``frame_size`` x ``frame_size`` grayscale frame
  (unless ``obs_type="ram"``) and, with ``image=True``, the colour screen as a PNG data URL (the
  convention of the Gymnasium env's renders, shown as a picture by the web page).
* the declared tasks (``AtariEnv.tasks``) are (game, seed) pairs: seeds 0..49 train and
  1 000 000..1 000 019 test for each game; ``reset(task=...)`` plays exactly that game and seed.
"""

from __future__ import annotations

import difflib
import io
import secrets
import uuid
from typing import Any

import numpy as np

from openenv.env import Environment
from openenv.errors import ValidationError, int_option
from openenv.tasks import InlineTasks, Task, merge_task
from openenv.types import EnvironmentMetadata, Image
from openenv_env_atari.models import ACTION_NAMES, AtariAction, AtariObservation, AtariState

__all__ = ["DEFAULT_GAME", "TASK_GAMES", "AtariEnv", "available_games"]

DEFAULT_GAME = "pong"
#: The games of the declared tasks.
TASK_GAMES = ("pong", "breakout", "space_invaders")
_TRAIN_SEEDS = range(0, 50)
_TEST_SEEDS = range(1_000_000, 1_000_020)
_OPTIONS = {"game", "frame_skip", "sticky_actions", "obs_type", "frame_size", "image", "max_steps"}


def available_games() -> list[str]:
    """Every game whose ROM ale-py ships (its ROM ids, e.g. ``space_invaders``)."""
    from ale_py import roms

    return sorted(roms.get_all_rom_ids())


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of



def _tasks() -> InlineTasks:
    rows = [{"id": f"{game}-{split}-{seed}", "split": split, "seed": seed, "game": game}
            for game in TASK_GAMES for split, seeds in (("train", _TRAIN_SEEDS), ("test", _TEST_SEEDS))
            for seed in seeds]
    return InlineTasks(rows, name="atari games x seeds")


class AtariEnv(Environment[AtariAction, AtariObservation, AtariState]):
    """One emulator per instance; instances share nothing, so sessions run concurrently."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # A step is a few emulator frames (fast), but an image step encodes a PNG: keep it off the loop.
    BLOCKING = True
    tasks = _tasks()

    def __init__(self) -> None:
        super().__init__()
        self._ale: Any = None
        self._game = DEFAULT_GAME
        self._seed: int | None = None
        self._actions: list[Any] = []
        self._frame_skip = 4
        self._sticky = 0.25
        self._obs_type = "grayscale"
        self._frame_size = 84
        self._image = False
        self._max_steps = 27_000
        self._steps = 0
        self._score = 0.0
        self._done = False
        self._episode_id: str | None = None

    # -- protocol ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> AtariObservation:
        # a declared task: its game and seed make the episode
        seed, kwargs = merge_task(task, seed, kwargs)
        unknown = sorted(set(kwargs) - _OPTIONS)
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; the Atari env accepts {sorted(_OPTIONS)}",
                          kind="unknown_option", loc=unknown[0])
        game = kwargs.get("game", DEFAULT_GAME)
        games = available_games()
        if game not in games:
            close = difflib.get_close_matches(str(game), games, n=3)
            hint = f"did you mean {close}?" if close else f"ale-py ships {len(games)} games, e.g. {list(TASK_GAMES)}"
            raise _refuse(f"unknown game {game!r}; {hint}", kind="unknown_game", loc="game", value=game)
        frame_skip = int_option(kwargs, "frame_skip", 4, 1, 16)
        frame_size = int_option(kwargs, "frame_size", 84, 8, 210)
        max_steps = int_option(kwargs, "max_steps", 27_000, 1, 10_000_000)
        sticky = kwargs.get("sticky_actions", 0.25)
        if not isinstance(sticky, int | float) or isinstance(sticky, bool) or not 0.0 <= sticky <= 1.0:
            raise _refuse(f"sticky_actions is a probability from 0.0 to 1.0, got {sticky!r}",
                          kind="bad_sticky_actions", loc="sticky_actions", value=sticky)
        obs_type = kwargs.get("obs_type", "grayscale")
        if obs_type not in ("grayscale", "ram"):
            raise _refuse(f"obs_type must be 'grayscale' or 'ram', got {obs_type!r}",
                          kind="bad_obs_type", loc="obs_type", value=obs_type)
        image = kwargs.get("image", False)
        if not isinstance(image, bool):
            raise _refuse(f"image must be true or false, got {image!r}", kind="bad_image", loc="image", value=image)
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise _refuse(f"seed must be a non-negative integer, got {seed!r}", kind="bad_seed", loc="seed",
                          value=seed)

        from ale_py import ALEInterface, LoggerMode, roms

        ALEInterface.setLoggerMode(LoggerMode.Error)
        ale = ALEInterface()
        # ALE takes a 31-bit seed; without one, draw it so that state() can still report it.
        self._seed = seed if seed is not None else secrets.randbelow(2**31)
        ale.setInt("random_seed", self._seed % (2**31))
        ale.setInt("frame_skip", 1)  # skipping is done here, so the reward of every frame is counted
        ale.setFloat("repeat_action_probability", float(sticky))
        rom = roms.get_rom_path(game)
        if rom is None:  # listed but absent: a broken ale-py install, not the caller's mistake
            raise RuntimeError(f"ale-py lists {game!r} but its ROM file is missing; reinstall ale-py")
        ale.loadROM(rom)
        self._ale, self._game, self._actions = ale, game, list(ale.getMinimalActionSet())
        self._frame_skip, self._sticky, self._obs_type = frame_skip, float(sticky), obs_type
        self._frame_size, self._image, self._max_steps = frame_size, image, max_steps
        self._steps, self._score, self._done = 0, 0.0, False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0, truncated=False)

    def step(self, action: AtariAction, timeout_s: float | None = None, **kwargs: Any) -> AtariObservation:
        if self._ale is None:
            raise _refuse("No episode in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (game over or max_steps): call reset().", kind="episode_over")
        legal = self.legal_actions()
        if action.action not in legal:
            raise _refuse(f"{action.action!r} is not an action of {self._game}; its legal actions are {legal}",
                          kind="illegal_action", loc="action", value=action.action)
        chosen = self._actions[legal.index(action.action)]
        reward = 0.0
        for _ in range(self._frame_skip):
            reward += float(self._ale.act(chosen))
            if self._ale.game_over():
                break
        self._steps += 1
        self._score += reward
        over = bool(self._ale.game_over())
        truncated = not over and self._steps >= self._max_steps
        self._done = over or truncated
        return self._observe(reward=reward, truncated=truncated, metadata={"step": self._steps})

    @property
    def state(self) -> AtariState:
        return AtariState(
            episode_id=self._episode_id, step_count=self._steps, game=self._game, seed=self._seed,
            frame_skip=self._frame_skip, sticky_actions=self._sticky, score=self._score, done=self._done,
        )

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="atari",
            description="Atari 2600 games through ale-py: reset(game=..., frame_skip=..., sticky_actions=...); "
            "the reward is the score gained; RAM and a small grayscale frame, a PNG with image=True.",
            version="0.1.0",
        )

    def close(self) -> None:
        self._ale = None

    # -- helpers ----------------------------------------------------------------------------------

    def legal_actions(self) -> list[str]:
        """The names of the game's minimal action set (in ALE's order)."""
        return [ACTION_NAMES[a.value] for a in self._actions]

    def _observe(self, *, reward: float, truncated: bool, metadata: dict[str, Any] | None = None) -> AtariObservation:
        ale = self._ale
        frame = None
        if self._obs_type == "grayscale":
            frame = _downsample(ale.getScreenGrayscale(), self._frame_size)
        return AtariObservation(
            game=self._game, ram=[int(b) for b in ale.getRAM()], frame=frame,
            image=_png_image(ale.getScreenRGB()) if self._image else None,
            legal_actions=[] if self._done else self.legal_actions(), lives=int(ale.lives()), score=self._score,
            frame_number=int(ale.getEpisodeFrameNumber()), steps_left=self._max_steps - self._steps,
            truncated=truncated, reward=reward, done=self._done, metadata=metadata or {},
        )


def _downsample(screen: np.ndarray, size: int) -> list[list[int]]:
    """A grayscale screen resized to ``size`` x ``size`` by area averaging (as the usual 84x84 preprocessing)."""
    from PIL import Image

    small = Image.fromarray(np.asarray(screen, dtype=np.uint8), "L").resize((size, size), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.uint8).tolist()  # type: ignore[no-any-return]


def _png_image(rgb: np.ndarray) -> Image:
    # Pillow's PNG (adaptive filters) is about a third the size of the kernel's filter-less encoder.
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(np.asarray(rgb, dtype=np.uint8), "RGB").save(buffer, "PNG")
    return Image.from_bytes(buffer.getvalue())
