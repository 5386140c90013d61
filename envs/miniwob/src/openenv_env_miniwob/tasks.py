"""The MiniWoB++ task pages shipped by the ``miniwob`` package, and the declared tasks.

Every page ``miniwob/html/miniwob/<name>.html`` is a task (130 in miniwob 1.x). The declared tasks
(``MiniWoBEnv.tasks``) are (task, seed) pairs: seeds 0..9 are ``train`` and 1 000 000..1 000 004
``test`` for every page, so the splits are disjoint and the same on every machine; a ``test`` task
also puts the page in MiniWoB's ``test`` data mode (``core.setDataMode``), which the tasks with a
dataset use to draw held-out problems.
"""

from __future__ import annotations

import functools
from pathlib import Path

from openenv.tasks import InlineTasks

__all__ = ["TEST_SEEDS", "TRAIN_SEEDS", "declared_tasks", "page_path", "pages_dir", "task_names"]

TRAIN_SEEDS = range(0, 10)
TEST_SEEDS = range(1_000_000, 1_000_005)


def pages_dir() -> Path:
    """The folder of the task pages inside the installed ``miniwob`` package."""
    import importlib.util

    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `miniwob` package (MiniWoB++ task pages) is not installed: pip install miniwob")
    folder = Path(next(iter(spec.submodule_search_locations))) / "html" / "miniwob"
    if not folder.is_dir():
        raise RuntimeError(f"the installed `miniwob` package has no task pages at {folder}; reinstall miniwob")
    return folder


@functools.cache
def task_names() -> tuple[str, ...]:
    """Every MiniWoB task the installed package ships, sorted (e.g. ``click-button``)."""
    return tuple(sorted(p.stem for p in pages_dir().glob("*.html")))


def page_path(name: str) -> Path:
    return pages_dir() / f"{name}.html"


def declared_tasks() -> InlineTasks:
    rows = [{"id": f"{name}-{split}-{seed}", "split": split, "seed": seed, "task": name}
            for name in task_names() for split, seeds in (("train", TRAIN_SEEDS), ("test", TEST_SEEDS))
            for seed in seeds]
    return InlineTasks(rows, name="miniwob tasks x seeds")
