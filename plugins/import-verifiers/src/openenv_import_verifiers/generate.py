"""Write an env package that serves a verifiers taskset (``openenv import verifiers:<module>``).

The package (``<out>/``): ``pyproject.toml`` with the ``openenv`` entry point, ``src/<pkg>/`` with
``openenv.yaml``, ``tasks.jsonl`` (one row per verifiers task: ``id``, ``split``, ``data`` = the
task's ``TaskData`` as JSON), ``env.py`` (a ``VerifiersEnv`` naming the module) and ``plugin.py``.
A taskset module that no installed distribution provides (a local file or folder) is copied into
the package, so the package works wherever it is installed. Everything is written to a temporary
folder next to ``out`` and renamed into place: a failure leaves nothing behind.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from openenv_import_verifiers.taskset import TasksetHandle, VerifiersImportError

__all__ = ["ENV_NAME", "Imported", "count_splits", "distribution_of", "generate", "parse_source", "plugin_py",
           "pyproject_toml", "vendor", "write_package"]

ENV_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass
class Imported:
    """What ``generate`` wrote."""

    path: Path
    name: str
    splits: dict[str, int]


def parse_source(source: str) -> str:
    """The module of ``verifiers:<module>``; anything else is refused with the accepted form."""
    kind, sep, module = source.partition(":")
    if not sep or kind != "verifiers" or not module:
        raise VerifiersImportError(f"cannot import {source!r}: give verifiers:<module>, e.g. "
                                   "`openenv import verifiers:my_taskset` (ors:PATH_OR_MODULE for an ORS env)")
    if not all(p.isidentifier() for p in module.split(".")):
        raise VerifiersImportError(f"{module!r} is not a Python module name (e.g. my_pkg.tasks)")
    return module


def _split_of(data: dict[str, Any], index: int, total: int, test_rows: int) -> str:
    split = data.get("split")
    if isinstance(split, str) and split:
        return split
    return "test" if index >= total - test_rows else "train"


def _rows(handle: TasksetHandle, tasks: list[Any], test_fraction: float) -> list[dict[str, Any]]:
    if not tasks:
        raise VerifiersImportError(f"{type(handle.taskset).__name__}.load() yielded no task: an env needs at least one")
    dumped = [t.data.model_dump(mode="json", exclude_none=True) for t in tasks]
    for i, data in enumerate(dumped):
        if data.get("prompt") in (None, "", []):
            raise VerifiersImportError(f"task {i} of {type(handle.taskset).__name__} has no prompt: every row needs "
                                       "a 'prompt' (text or chat messages) for the agent to answer")
    ids = [d.get("id") for d in dumped]
    use_ids = all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)
    test_rows = math.ceil(len(dumped) * test_fraction) if len(dumped) > 1 else 0
    return [{"id": ids[i] if use_ids else str(d.get("idx", i)), "split": _split_of(d, i, len(dumped), test_rows),
             "data": d} for i, d in enumerate(dumped)]


def distribution_of(module: str, generating: str) -> str | None:
    """The installed distribution that provides ``module``: not the package being generated (an
    earlier import of the same taskset, installed, provides its copy of the module too)."""
    top = module.split(".")[0]
    dists = [d for d in metadata.packages_distributions().get(top) or []
             if _normal(d) != _normal(generating)]
    return dists[0] if dists else None


def _normal(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def vendor(module: str, src: Path, dist: str) -> str | None:
    """Copy a module no distribution provides into ``src``; its path there, or None."""
    import importlib.util

    top = module.split(".")[0]
    if distribution_of(module, dist) is not None:
        return None
    spec = importlib.util.find_spec(top)
    if spec is None or spec.origin in (None, "built-in", "frozen"):
        return None
    if spec.submodule_search_locations:  # a package folder
        folder = Path(next(iter(spec.submodule_search_locations)))
        shutil.copytree(folder, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return top
    shutil.copy2(spec.origin, src / f"{top}.py")
    return f"{top}.py"


def _files(name: str, pkg: str, module: str, dependency: str | None, vendored: str | None,
           reward_range: tuple[float, float] | None) -> dict[str, str]:
    cls = "".join(p.title() for p in name.split("_")) + "Env"
    deps = ['"openenvkit>=0.1,<0.2"', '"openenvkit-import-verifiers>=0.1,<0.2"', '"verifiers>=0.4,<0.5"']
    if dependency:
        deps.append(json.dumps(dependency))
    return {
        "pyproject.toml": pyproject_toml(_dist_name(name), name, pkg, deps, vendored,
                                         f"The verifiers taskset {module} as an OpenEnv env (generated by "
                                         "`openenv import`)."),
        f"src/{pkg}/__init__.py": f'"""The verifiers taskset {module} as an OpenEnv env."""\n',
        f"src/{pkg}/env.py": f'''"""The env: verifiers taskset {module}, one reply per task (`openenv import`)."""

from __future__ import annotations

from pathlib import Path

from openenv.tasks import TaskFile
from openenv_import_verifiers.env import VerifiersEnv

__all__ = ["{cls}"]


class {cls}(VerifiersEnv):
    taskset_module = "{module}"
    tasks = TaskFile(Path(__file__).with_name("tasks.jsonl"))
''',
        f"src/{pkg}/plugin.py": plugin_py(name, pkg, cls, f"verifiers taskset {module}, one reply per task"),
        f"src/{pkg}/openenv.yaml": f"""spec_version: 1
name: {name}
env: {pkg}.env:{cls}
type: space
runtime: fastapi
port: 8000
version: "0.1.0"
description: "verifiers taskset {module}: step with {{completion: text}}, scored by the task's own rewards."
tags: [verifiers, single-step, llm]
{_range_line(reward_range)}# verifiers' named rewards as reward_components (plugins/import-verifiers)
rubric: verifiers_rewards
""",
    }


def _dist_name(name: str) -> str:
    return f"openenv-vf-{name.replace('_', '-')}"


def pyproject_toml(dist: str, name: str, pkg: str, deps: list[str], vendored: str | None, description: str) -> str:
    """The generated package's ``pyproject.toml``: its ``openenv`` entry point, and a copied (vendored)
    source module or package shipped in the wheel beside the env package."""
    wheel = f'packages = ["src/{pkg}"]'
    if vendored and vendored.endswith(".py"):  # one file: hatch's packages takes folders only
        wheel += f'\n\n[tool.hatch.build.targets.wheel.force-include]\n"src/{vendored}" = "{vendored}"'
    elif vendored:
        wheel = f'packages = ["src/{pkg}", "src/{vendored}"]'
    return f"""[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
requires-python = ">=3.11"
dependencies = [{", ".join(deps)}]

[project.entry-points.openenv]
{name} = "{pkg}.plugin"

[build-system]
requires = ["hatchling>=1.24"]
build-backend = "hatchling.build"

[tool.hatch.build.targets.wheel]
{wheel}
"""


def plugin_py(name: str, pkg: str, cls: str, description: str) -> str:
    """The generated package's hook module: registers the env with its manifest."""
    return f'''"""Registers the env {name} (generated by `openenv import`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openenv.hookspecs import hookimpl

__all__ = ["openenv_register_envs"]


@hookimpl
def openenv_register_envs(registry: Any) -> None:
    registry.register("{name}", "{pkg}.env:{cls}", description="{description}",
                      manifest=str(Path(__file__).with_name("openenv.yaml")))
'''


def _range_line(reward_range: tuple[float, float] | None) -> str:
    if reward_range is None or not reward_range[0] < reward_range[1]:
        return "# no reward_range: the taskset's judges (or weights) give no known bound\n"
    low, high = reward_range
    return (f"# each @vf.reward in [0, 1] (verifiers' convention), times its weight, summed\n"
            f"reward_range: [{low}, {high}]\n")


def generate(source: str, out: Path, *, name: str | None = None, force: bool = False, limit: int = 100_000,
             test_fraction: float = 0.2, args: dict[str, Any] | None = None) -> Imported:
    """Import ``source`` (``verifiers:<module>``) as an env package at ``out``: a taskset module
    (verifiers 0.4's v1 API), or a module with ``load_environment`` (the old API: ``legacy.py``;
    ``args`` are its keyword arguments)."""
    module = parse_source(source)
    name = name or module.replace(".", "_").lower()
    if not ENV_NAME.match(name):
        raise VerifiersImportError(f"env name {name!r} must be lower-case letters, digits and _ starting with a "
                                   "letter: pass --name, e.g. --name my_taskset")
    if not 0.0 <= test_fraction < 1.0:
        raise VerifiersImportError(f"--test-fraction must be in [0, 1), got {test_fraction}")
    out = out.resolve()
    if out.exists() and not force:
        raise VerifiersImportError(f"{out} already exists: pick another -o, or pass --force to replace it")
    import importlib.util

    from openenv_import_verifiers.legacy import LEGACY_PIN, has_load_environment

    if importlib.util.find_spec("verifiers") is None:
        raise VerifiersImportError("verifiers is not installed here: `pip install 'verifiers>=0.4,<0.5'` next to "
                                   f"openenv for a taskset module, or 'verifiers=={LEGACY_PIN}' for a module with "
                                   "load_environment() (verifiers' old API)")
    if has_load_environment(module):
        from openenv_import_verifiers.legacy_generate import generate_legacy

        return generate_legacy(module, out, name=name, args=dict(args or {}), limit=limit,
                               test_fraction=test_fraction)
    if args:
        raise VerifiersImportError(f"--arg is for a module with load_environment() (verifiers' old API); "
                                   f"{module!r} has none: leave --arg out")
    handle = TasksetHandle.load(module)
    tasks = list(handle.iter_tasks(limit))
    rows = _rows(handle, tasks, test_fraction)
    # every task of a taskset is of one class with one config: the first one's rewards are all's
    reward_range = handle.reward_range(tasks[0])
    pkg = f"openenv_vf_{name}"
    dist = _dist_name(name)

    def fill(tmp: Path) -> None:
        vendored = vendor(module, tmp / "src", dist)
        for rel, text in _files(name, pkg, module, distribution_of(module, dist), vendored, reward_range).items():
            (tmp / rel).write_text(text)

    write_package(out, pkg, rows, fill)
    return Imported(path=out, name=name, splits=count_splits(rows))


def count_splits(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many rows each split has, in the order the splits first appear."""
    splits: dict[str, int] = {}
    for row in rows:
        splits[row["split"]] = splits.get(row["split"], 0) + 1
    return splits


def write_package(out: Path, pkg: str, rows: list[dict[str, Any]], fill: Callable[[Path], None]) -> None:
    """Write a package to ``out``: ``src/<pkg>/tasks.jsonl`` from ``rows``, the rest by ``fill(folder)``.
    Everything goes to a temporary folder next to ``out`` first and is renamed into place, so a
    failure leaves nothing behind (and ``--force`` removes the old folder only once the new one is
    complete)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "src" / pkg).mkdir(parents=True)
        fill(tmp)
        with (tmp / "src" / pkg / "tasks.jsonl").open("w") as fh:
            for row in rows:
                fh.write(json.dumps(row, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
