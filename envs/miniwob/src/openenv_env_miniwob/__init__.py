"""MiniWoB++ web tasks on Debian's Chromium: DOM element list with refs, utterance, screenshot.

Names are imported on first use: loading the plugin hook module (``openenv_env_miniwob.plugin``),
which imports this package, must not import the env (nor Playwright).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_miniwob.env import MiniWoBEnv
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
    from openenv_env_miniwob.policy import SOLVED_TASKS, scripted_solver
    from openenv_env_miniwob.tasks import task_names


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "Click": ".models",
    "ClickAt": ".models",
    "Element": ".models",
    "Key": ".models",
    "MiniWoBAction": ".models",
    "MiniWoBEnv": ".env",
    "MiniWoBObservation": ".models",
    "MiniWoBState": ".models",
    "Noop": ".models",
    "SOLVED_TASKS": ".policy",
    "Scroll": ".models",
    "TypeText": ".models",
    "scripted_solver": ".policy",
    "task_names": ".tasks",
})
