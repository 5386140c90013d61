"""MiniWoB++ tasks played in Debian's Chromium, one isolated browser context per session.

Dynamics (all promises are tested):

* ``reset(seed=k, page="click-button", split="train", reward="raw", screenshot=True, max_steps=50,
  time_limit_ms=None)``
  opens the task page afresh in this session's own browser context (cookies, storage and cache of
  its own; offline, only ``file://``), seeds the page's generator with ``k`` and starts the
  episode: same task, seed and split, same problem (utterance, elements, layout). ``page`` is any
  task the ``miniwob`` package ships (``task_names()``; did-you-mean on a typo). ``split="test"``
  puts the page in MiniWoB's test data mode;
* observations carry the instruction (``utterance``), the visible elements with refs that stay the
  same for the whole episode, and a PNG screenshot of the 160x210 task area as a data URL in
  ``image`` (the convention the web page shows as a picture);
* commands: ``click`` (ref), ``click_at`` (x, y), ``type`` (ref, text), ``key``, ``scroll``, ``noop``. A command
  that cannot be carried out (an unknown ref, typing into a button, a key the browser does not
  know) changes nothing and comes back as the observation's ``error``; the episode goes on;
* the reward is the task's own, given when the task ends the episode: ``raw`` (default: without
  the time discount, so a seeded episode replays to the same rewards) or ``timed`` (MiniWoB's
  official reward, positive rewards scaled by the time left). Both are in every observation;
* the episode ends (``done``) when the task says so, is ``truncated`` at the task's own time limit
  (``core.EPISODE_MAX_TIME``, a wall-clock limit in the page, 10 s for most tasks; ``time_limit_ms``
  replaces it; the task then gives -1) or after
  ``max_steps`` commands;
* a browser that crashes or stops answering (each browser call is bounded by ``op_timeout_s``)
  fails the session's episode with ``ExecutionError`` (``data.reason == "browser_failed"``); its
  ``reset`` starts over in a freshly launched browser. ``close`` closes the context, and the last
  session to close stops Chromium (``browser.BrowserHost``).
"""

from __future__ import annotations

import difflib
import secrets
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError, int_option
from openenv.tasks import Task, checked_task
from openenv.types import EnvironmentMetadata
from openenv_env_miniwob import page as pg
from openenv_env_miniwob.browser import BrowserFailure, BrowserHost, host
from openenv_env_miniwob.models import (
    Click,
    ClickAt,
    Element,
    Key,
    MiniWoBAction,
    MiniWoBObservation,
    MiniWoBState,
    Noop,
    Scroll,
    TypeText,
)
from openenv_env_miniwob.tasks import declared_tasks, page_path, task_names

__all__ = ["DEFAULT_PAGE", "KEY_NAMES", "MiniWoBEnv"]

T = TypeVar("T")

DEFAULT_PAGE = "click-button"
_OPTIONS = {"page", "split", "reward", "screenshot", "max_steps", "time_limit_ms"}
#: Key names for did-you-mean hints (Playwright also takes single characters and Modifier+Key).
KEY_NAMES = ("Backspace", "Tab", "Enter", "Shift", "Control", "Alt", "Meta", "Escape", "Space", "Delete", "Home",
             "End", "PageUp", "PageDown", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Insert",
             *(f"F{i}" for i in range(1, 13)))


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


class MiniWoBEnv(Environment[MiniWoBAction, MiniWoBObservation, MiniWoBState]):
    """One browser context per instance in the process's shared Chromium; sessions run concurrently."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = True  # every call waits for the browser
    tasks = declared_tasks()

    def __init__(self, *, op_timeout_s: float = 20.0, browser: BrowserHost | None = None) -> None:
        super().__init__()
        self._host = browser or host()
        self._op_timeout_s = op_timeout_s
        self._acquired = False
        self._context: Any = None
        self._page: Any = None
        self._failed: str | None = None
        self._name = DEFAULT_PAGE
        self._seed: int | None = None
        self._split = "train"
        self._reward_kind = "raw"
        self._screenshot = True
        self._max_steps = 50
        self._time_limit_ms: int | None = None
        self._steps = 0
        self._score = 0.0
        self._done = False
        self._episode_id: str | None = None

    # -- protocol ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> MiniWoBObservation:
        if task is not None:  # a declared task: its page, seed and split make the episode
            task = checked_task(task)
            seed = task.seed if task.seed is not None else seed
            kwargs = {**kwargs, "page": task.data.get("task", DEFAULT_PAGE), "split": task.split}
        self._configure(seed, kwargs)
        self._episode_id = episode_id or str(uuid.uuid4())
        self._steps, self._score, self._done, self._failed = 0, 0.0, False, None
        if not self._acquired:
            self._host.acquire()
            self._acquired = True
        self._close_context()
        url = page_path(self._name).as_uri()
        seed_now, mode, limit = self._seed, self._split, self._time_limit_ms
        assert seed_now is not None

        async def start() -> None:
            context = await self._host.new_context(viewport=pg.VIEWPORT, device_scale_factor=1,
                                                      offline=True, java_script_enabled=True)
            self._context = context
            self._page = await context.new_page()
            await pg.start_episode(self._page, url, seed_now, mode, limit, self._op_timeout_s * 1000)
            # One episode per page load: the start cover MiniWoB shows after an episode would
            # otherwise start a new problem when clicked.
            await self._page.evaluate("() => { if (core.cover_div) core.cover_div.onclick = null; }")

        self._browser_call(start)
        return self._observe(reward=0.0, status=self._browser_call(lambda: pg.status(self._page)), error=None)

    def step(self, action: MiniWoBAction, timeout_s: float | None = None, **kwargs: Any) -> MiniWoBObservation:
        if self._failed is not None:
            raise ExecutionError(self._failed, data={"reason": "browser_failed"})
        if self._page is None:
            raise _refuse("No episode in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (the task ended it, its time ran out or max_steps): call reset().",
                          kind="episode_over")
        if not isinstance(action, MiniWoBAction):
            raise _refuse(f"expected a MiniWoBAction, got {type(action).__name__}", kind="bad_action")
        before = self._browser_call(lambda: pg.status(self._page))
        error = None
        if not before["done"]:  # the task's timer may have ended the episode while the agent thought
            try:
                self._browser_call(lambda: self._perform(action.command))
            except pg.CommandRefused as refused:
                error = str(refused)
        self._steps += 1
        return self._observe(reward=None, status=self._browser_call(lambda: pg.status(self._page)), error=error)

    @property
    def state(self) -> MiniWoBState:
        return MiniWoBState(episode_id=self._episode_id, step_count=self._steps, task=self._name, seed=self._seed,
                            split=self._split, reward_kind=self._reward_kind, done=self._done, score=self._score)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="miniwob",
            description="MiniWoB++ web tasks in Debian's Chromium: reset(page=..., seed=...); observe the "
            "utterance, the visible elements (stable refs) and a screenshot; click/type/key/scroll.",
            version="0.1.0",
        )

    def close(self) -> None:
        self._close_context()
        if self._acquired:
            self._acquired = False
            self._host.release()

    # -- helpers ----------------------------------------------------------------------------------

    def _configure(self, seed: int | None, options: dict[str, Any]) -> None:
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; the MiniWoB env accepts {sorted(_OPTIONS)}",
                          kind="unknown_option", loc=unknown[0])
        name = options.get("page", DEFAULT_PAGE)
        names = task_names()
        if name not in names:
            close = difflib.get_close_matches(str(name), names, n=3)
            hint = f"did you mean {close}?" if close else f"the miniwob package ships {len(names)} tasks, e.g. " \
                f"{list(names[:3])} (task_names() lists them)"
            raise _refuse(f"unknown MiniWoB task {name!r}; {hint}", kind="unknown_page", loc="page", value=name)
        split = options.get("split", "train")
        if split not in ("train", "test"):
            raise _refuse(f"split must be 'train' or 'test', got {split!r}", kind="bad_split", loc="split",
                          value=split)
        reward = options.get("reward", "raw")
        if reward not in ("raw", "timed"):
            raise _refuse(f"reward must be 'raw' (the task's reward) or 'timed' (MiniWoB's time-discounted "
                          f"reward), got {reward!r}", kind="bad_reward", loc="reward", value=reward)
        screenshot = options.get("screenshot", True)
        if not isinstance(screenshot, bool):
            raise _refuse(f"screenshot must be true or false, got {screenshot!r}", kind="bad_screenshot",
                          loc="screenshot", value=screenshot)
        max_steps = int_option(options, "max_steps", 50, 1, 10_000)
        limit = options.get("time_limit_ms")
        bad_limit = not isinstance(limit, int) or isinstance(limit, bool) or not 100 <= limit <= 3_600_000
        if limit is not None and bad_limit:
            raise _refuse(f"time_limit_ms must be an integer from 100 to 3600000 (or null: the task's own limit), "
                          f"got {limit!r}", kind="bad_time_limit_ms", loc="time_limit_ms", value=limit)
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise _refuse(f"seed must be a non-negative integer, got {seed!r}", kind="bad_seed", loc="seed",
                          value=seed)
        self._name, self._split, self._reward_kind = name, split, reward
        self._screenshot, self._max_steps, self._time_limit_ms = screenshot, max_steps, limit
        # Without a seed, draw one so that state() reports it and the episode can be replayed.
        self._seed = seed if seed is not None else secrets.randbelow(2**31)

    def _browser_call(self, make: Callable[[], Awaitable[T]]) -> T:
        """A call into the browser; a crashed or hung browser fails this session's episode."""
        from playwright.async_api import Error as PlaywrightError

        try:
            return self._host.call(make, self._op_timeout_s)
        except pg.CommandRefused:
            raise
        except (BrowserFailure, PlaywrightError) as exc:
            if isinstance(exc, PlaywrightError) and self._host.is_alive() and "closed" not in str(exc).lower():
                raise  # a real page error (a task's script threw): not the browser's death
            self._failed = (f"the browser of this session failed ({str(exc).splitlines()[0]}); the episode is "
                            "lost: reset() starts a new one in a fresh browser")
            self._close_context()  # a page that hung in a live browser is closed; a dead one has nothing left
            raise ExecutionError(self._failed, data={"reason": "browser_failed"}) from None

    async def _perform(self, command: Click | ClickAt | TypeText | Key | Scroll | Noop) -> None:
        from playwright.async_api import Error as PlaywrightError

        page = self._page
        if isinstance(command, Click):
            info = await pg.element_info(page, command.ref)
            await pg.click_point(page, info["x"], info["y"])
        elif isinstance(command, ClickAt):
            await pg.click_point(page, command.x, command.y)
        elif isinstance(command, TypeText):
            info = await pg.element_info(page, command.ref)
            if not info["editable"]:
                raise pg.CommandRefused(f"element ref {command.ref} is a <{info['tag']}>, which takes no text; "
                                        "type into an input_text, textarea or contenteditable element")
            if info["disabled"]:
                raise pg.CommandRefused(f"element ref {command.ref} (<{info['tag']}>) is disabled")
            await pg.click_point(page, info["x"], info["y"])
            await page.keyboard.type(command.text)
        elif isinstance(command, Key):
            try:
                await page.keyboard.press(command.key)
            except PlaywrightError as exc:
                if "Unknown key" not in str(exc):
                    raise
                close = difflib.get_close_matches(command.key, KEY_NAMES, n=3, cutoff=0.5)
                hint = f"did you mean {close}?" if close else f"use a key name such as {list(KEY_NAMES[:6])} or " \
                    "one character"
                raise pg.CommandRefused(f"the browser does not know the key {command.key!r}; {hint}") from None
        elif isinstance(command, Scroll):
            await page.mouse.wheel(command.dx, command.dy)

    def _observe(self, *, reward: float | None, status: dict[str, Any], error: str | None) -> MiniWoBObservation:
        done = bool(status["done"])
        timed_out = done and status.get("reason") == "timed out"
        step_reward = 0.0
        if done:
            step_reward = float(status["raw"] if self._reward_kind == "raw" else status["reward"])
        truncated = timed_out or (not done and self._steps >= self._max_steps)
        self._done = done or truncated
        self._score += step_reward
        elements, image = self._browser_call(lambda: pg.observe(self._page, screenshot=self._screenshot))
        return MiniWoBObservation(
            task=self._name, utterance=status.get("utterance") or "",
            elements=[Element(**{**e, "bbox": tuple(round(v, 1) for v in e["bbox"])}) for e in elements],
            image=image, error=error, reason=status.get("reason") if done else None,
            raw_reward=float(status["raw"]) if done else 0.0, timed_reward=float(status["reward"]) if done else 0.0,
            truncated=truncated, steps_left=max(0, self._max_steps - self._steps),
            reward=step_reward if reward is None else reward, done=self._done,
            metadata={"step": self._steps, "seed": self._seed},
        )

    def _close_context(self) -> None:
        context, self._context, self._page = self._context, None, None
        if context is None or not self._host.is_alive():
            return
        try:
            self._host.call(context.close, min(self._op_timeout_s, 10.0))
        except Exception:  # a context of a dead browser: nothing is left to close
            pass
