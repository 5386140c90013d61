"""Everything that finds and reads an ORS environment (the Open Reward Standard, the ``openreward``
package), in one place.

``resolve(target)`` turns what follows ``ors:`` (a ``.py`` file, a package folder or a module name,
optionally ``:ClassName``) into an importable module and the ``openreward.environments.Environment``
subclass it defines; ``load_class`` imports it again where the generated package is served;
``list_task_rows`` reads the class's splits and task specs (ORS's own ``list_splits`` /
``get_task_range``). ORS's task methods may be sync or async: ``run_sync`` runs either to completion.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from openenv.errors import ConfigError
from openenv_import_verifiers._sync import run_sync

__all__ = ["OrsImportError", "OrsTarget", "list_task_rows", "load_class", "openreward_environments", "resolve",
           "run_sync"]

T = TypeVar("T")

#: The openreward releases whose ORS API this plugin uses (session tools, terminal tools); the
#: install hint below names the same range.
OPENREWARD_REQUIREMENT = "openreward>=0.1.167,<0.2"


class OrsImportError(ConfigError):
    """An ORS source we cannot serve; the message says why and what to do."""


@dataclass
class OrsTarget:
    """A resolved ``ors:`` source: the module to import, the folder to put on ``sys.path`` for it
    (a path source; None for an installed module) and the Environment subclass's name."""

    module: str
    class_name: str
    folder: Path | None
    env_class: Any


def openreward_environments() -> Any:
    """``openreward.environments``, or the one-line error that says what to install."""
    try:
        return importlib.import_module("openreward.environments")
    except ImportError:
        raise OrsImportError("openreward is not installed here (no module openreward.environments): "
                             "`pip install 'openreward>=0.1.167,<0.2'` next to openenv, then import again") from None


def _split_class(target: str) -> tuple[str, str | None]:
    """``pkg.mod:Cls`` -> (``pkg.mod``, ``Cls``); a Windows-free path keeps its colons otherwise."""
    head, sep, tail = target.rpartition(":")
    if sep and head and tail.isidentifier():
        return head, tail
    return target, None


def _module_of_path(path: Path) -> tuple[str, Path]:
    """(module name, folder for sys.path) of a ``.py`` file or a package folder."""
    if not path.exists():
        raise OrsImportError(f"{path} does not exist: give an ORS environment's .py file, its package folder "
                             "or an importable module, e.g. `openenv import ors:envs/arith.py`")
    if path.is_file():
        if path.suffix != ".py" or not path.stem.isidentifier():
            raise OrsImportError(f"{path} is not a Python module file (NAME.py): give the .py file that defines "
                                 "the ORS Environment subclass")
        return path.stem, path.parent
    if not (path / "__init__.py").is_file():
        candidates = sorted(p.name for p in path.glob("*.py"))
        hint = f" (its files: {', '.join(candidates[:5])})" if candidates else ""
        raise OrsImportError(f"{path} is a folder but not a Python package (no __init__.py): give the .py file "
                             f"that defines the ORS Environment subclass, e.g. ors:{path}/env.py{hint}")
    if not path.resolve().name.isidentifier():
        raise OrsImportError(f"package folder {path.resolve().name!r} is not a Python identifier: rename it "
                             "(letters, digits, _) or give its .py file")
    return path.resolve().name, path.resolve().parent


def _import(module: str, folder: Path | None) -> Any:
    if folder is not None and str(folder) not in sys.path:
        # The source's folder stays importable: the env class may import its siblings at run time.
        sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise OrsImportError(f"no module named {module!r}: install the package that holds the ORS "
                                 f"environment, or give its file (`openenv import ors:path/to/{module}.py`)") from None
        raise OrsImportError(f"module {module!r} needs {exc.name!r}, which is not installed: install the "
                             "distribution that provides it and import again") from None
    except Exception as exc:  # the source's own import-time code: report it, in its words
        raise OrsImportError(f"importing {module!r} failed: {type(exc).__name__}: {exc}") from exc


def _environments_in(mod: Any, base: type) -> list[type]:
    exported = getattr(mod, "__all__", None)
    names = list(exported) if exported else [n for n in vars(mod) if not n.startswith("_")]
    found: list[type] = []
    for name in names:
        value = getattr(mod, name, None)
        if not (isinstance(value, type) and issubclass(value, base) and value is not base):
            continue
        # A class imported from elsewhere (another env it extends) is not this module's env.
        if exported is None and value.__module__ != mod.__name__:
            continue
        if not inspect.isabstract(value) and value not in found:
            found.append(value)
    return found


def resolve(target: str) -> OrsTarget:
    """The ORS environment that ``target`` (what follows ``ors:``) names."""
    if not target:
        raise OrsImportError("give ors:PATH_OR_MODULE, e.g. `openenv import ors:envs/arith.py` or "
                             "`openenv import ors:my_pkg.env` (add :ClassName to pick one of several)")
    envs = openreward_environments()
    where, class_name = _split_class(target)
    folder: Path | None = None
    looks_like_path = "/" in where or where.endswith(".py") or where in (".", "..") or Path(where).exists()
    if looks_like_path:
        module, folder = _module_of_path(Path(where))
    elif all(part.isidentifier() for part in where.split(".")):
        module = where
    else:
        raise OrsImportError(f"{where!r} is neither a path that exists nor a Python module name: give "
                             "ors:path/to/env.py, ors:path/to/package or ors:my_pkg.module")
    mod = _import(module, folder)
    found = _environments_in(mod, envs.Environment)
    if class_name is not None:
        chosen = [c for c in found if c.__name__ == class_name]
        if not chosen:
            from openenv.errors import did_you_mean

            defined = [c.__name__ for c in found]
            raise OrsImportError(f"module {module!r} has no ORS Environment subclass {class_name!r}."
                                 f"{did_you_mean(class_name, defined)} It defines: {', '.join(defined) or 'none'}")
        found = chosen
    if not found:
        raise OrsImportError(f"module {module!r} defines no ORS Environment subclass: an ORS env is a class "
                             "that subclasses openreward.environments.Environment and implements list_splits, "
                             "list_tasks and get_prompt; point ors: at the file that defines it")
    if len(found) > 1:
        names = ", ".join(c.__name__ for c in found)
        raise OrsImportError(f"module {module!r} defines {len(found)} ORS Environment subclasses ({names}): "
                             f"pick one, e.g. `openenv import ors:{target}:{found[0].__name__}`")
    return OrsTarget(module=module, class_name=found[0].__name__, folder=folder, env_class=found[0])


def load_class(module: str, class_name: str) -> Any:
    """The ORS Environment class a generated package names (imported where it is served)."""
    envs = openreward_environments()
    value = getattr(_import(module, None), class_name, None)
    if not (isinstance(value, type) and issubclass(value, envs.Environment)):
        raise OrsImportError(f"{module}:{class_name} is not an ORS Environment subclass (any more): import the "
                             "ORS environment again with `openenv import ors:...`")
    return value


def _split_names(env_class: Any) -> list[tuple[str, str]]:
    """(name, type) of each split the class lists (ORS's ``Split`` objects or plain names)."""
    out: list[tuple[str, str]] = []
    try:
        splits = run_sync(env_class.list_splits())
    except Exception as exc:
        raise OrsImportError(f"{env_class.__name__}.list_splits() failed: {type(exc).__name__}: {exc}") from exc
    for split in splits:
        if isinstance(split, str):
            name, kind = split, None
        else:
            name, kind = str(getattr(split, "name", split)), getattr(split, "type", None)
        out.append((name, kind if kind in ("train", "validation", "test") else ""))
    return out


def list_task_rows(env_class: Any, limit: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The tasks.jsonl rows (``id``, ``split``, ``data`` = the ORS task spec) of every split, at most
    ``limit`` in all, and each split's declared type."""
    splits = _split_names(env_class)
    if not splits:
        raise OrsImportError(f"{env_class.__name__}.list_splits() lists no split: an env needs at least one "
                             "(e.g. return ['train', 'test'])")
    rows: list[dict[str, Any]] = []
    for name, _ in splits:
        room = limit - len(rows)
        if room <= 0:
            break
        try:
            specs = run_sync(env_class.get_task_range(name, 0, room))
        except Exception as exc:
            raise OrsImportError(f"{env_class.__name__}: listing the tasks of split {name!r} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        for index, spec in enumerate(specs):
            if not isinstance(spec, Mapping):
                raise OrsImportError(f"task {index} of split {name!r} is a {type(spec).__name__}, not a JSON "
                                     "object: ORS task specs are objects (list_tasks returns dicts)")
            rows.append({"split": name, "index": index, "data": dict(spec)})
    if not rows:
        raise OrsImportError(f"{env_class.__name__} lists no task in any split "
                             f"({', '.join(n for n, _ in splits)}): an env needs at least one")
    ids = [row["data"].get("id") for row in rows]
    # The spec's own id when every task has a distinct one; else the split and index, which ORS
    # itself uses to name a task (CreateSession(split=..., index=...)).
    use_ids = all(isinstance(i, str | int) and not isinstance(i, bool) and str(i) for i in ids) \
        and len({str(i) for i in ids}) == len(ids)
    for row, task_id in zip(rows, ids, strict=True):
        row["id"] = str(task_id) if use_ids else f"{row['split']}-{row['index']}"
        del row["index"]
    return rows, {name: kind for name, kind in splits if kind}
