"""What ``openenv serve ARG`` serves: an env package folder's manifest, a registered env's rubric,
and the messages for an env that cannot be imported (helpers of ``serve_cmd``).

An upstream-style env folder is a package whose ``server/`` imports ``..models``: it is imported as
``<folder>.server.app:app`` (the module form upstream documents), and a bare ``server.app:app``
that fails with a relative import beyond the top level is retried that way.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from openenv.cli._output import EXIT_USAGE, fail

__all__ = ["_load_failure", "_looks_like_path", "_package_app", "_package_ref_for", "_registered_manifest_rubric",
           "_relative_import_beyond_top"]


def _load_failure(env: str, exc: Exception) -> str:
    """The message for an env that cannot be imported; prints the traceback when the env's own
    code raised (the useful part is inside the env), not for a mistyped module name."""
    from openenv.errors import PluginError

    cause = exc.__cause__ if isinstance(exc, PluginError) and exc.__cause__ else exc
    module = env.partition(":")[0]
    if isinstance(cause, ModuleNotFoundError) and cause.name and module.startswith(cause.name):
        return (f"could not load env '{env}': no module named '{cause.name}'. Check the spelling, "
                "or make the module importable (install its package, or set PYTHONPATH).")
    attr = env.rpartition(":")[2]
    if isinstance(cause, AttributeError) and ":" in env and cause.name == attr:
        # Only when the module lacks the named object; an AttributeError raised while the module
        # itself imports is a bug in the env's code (traceback below).
        return f"could not load env '{env}': {cause}. Check the name after the colon."
    import traceback

    traceback.print_exception(cause)
    return (f"could not load env '{env}': {type(cause).__name__}: {cause}. The env's code raised "
            "while being imported; see the traceback above.")


def _relative_import_beyond_top(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is Python's "attempted relative import beyond top-level
    package": a module of a package imported as if it were top-level."""
    seen: BaseException | None = exc
    for _ in range(5):  # PluginError wraps the import error; follow a short chain only
        if seen is None:
            return False
        if isinstance(seen, ImportError) and "beyond top-level package" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _package_ref_for(ref: str, exc: BaseException, folder: Path) -> str | None:
    """``<folder>.<ref>`` with the folder's parent on ``sys.path``, when ``ref`` (``server.app:app``)
    failed with a relative import beyond the top level and ``folder`` is the package holding it."""
    module = ref.partition(":")[0]
    top = module.split(".")[0]
    folder = folder.resolve()
    if (":" not in ref or not _relative_import_beyond_top(exc) or not folder.name.isidentifier()
            or not (folder / "__init__.py").is_file() or not (folder / top).exists()):
        return None
    if str(folder.parent) not in sys.path:
        sys.path.insert(0, str(folder.parent))
    return f"{folder.name}.{ref}"


def _looks_like_path(arg: str) -> bool:
    """A folder or manifest path, as opposed to an env name or a ``module:attr`` reference."""
    return "/" in arg or os.sep in arg or arg in (".", "..") or arg.endswith((".yaml", ".yml"))


def _registered_manifest_rubric(env: str, pm: Any) -> str | None:
    """The ``rubric:`` of a registered env's ``openenv.yaml`` (None if it has none or no manifest)."""
    from openenv.manifest import ManifestError, load_manifest, locate_manifest

    try:
        entry = pm.catalog.envs.get(env)
    except Exception:  # unknown names are reported by resolve_env below
        return None
    ref = getattr(entry, "manifest", None)
    if not ref:
        return None
    try:
        return load_manifest(locate_manifest(ref)).rubric
    except ManifestError as exc:
        fail(str(exc), EXIT_USAGE)
    return None  # pragma: no cover - fail() exits


def _package_app(arg: str) -> tuple[str, str, str | None, str | None]:
    """Read the env package's ``openenv.yaml``; put its folder on ``sys.path``; return (app ref,
    name, rubric spec, hint). The hint, for a manifest without ``env:``, says where the app
    reference came from and what to declare instead, for when it does not load."""
    from openenv.manifest import MANIFEST_FILENAME, ManifestError, load_manifest

    path = Path(arg)
    usage = (f"`openenv serve` takes an env folder with an {MANIFEST_FILENAME} (its `app:` names the app, "
             "e.g. `app: server.app:app`), a registered env name, or 'module:Class'.")
    if not path.exists():
        fail(f"{arg}: no such folder. {usage}", EXIT_USAGE)
    manifest_file = path / MANIFEST_FILENAME if path.is_dir() else path
    if path.is_dir() and not manifest_file.is_file():
        # A package root laid out as src/<pkg>/openenv.yaml (what `openenv init` makes).
        found = sorted(path.glob(f"src/*/{MANIFEST_FILENAME}"))
        if len(found) == 1:
            manifest_file = found[0]
    if not manifest_file.is_file():
        fail(f"no {MANIFEST_FILENAME} in {path}. {usage}", EXIT_USAGE)
    try:
        manifest = load_manifest(manifest_file)
    except ManifestError as exc:
        fail(str(exc), EXIT_USAGE)
    folder = manifest_file.resolve().parent
    # The manifest's folder (an upstream-style env folder: server/app.py beside it), or the folder
    # holding its package when it sits inside one (src/<pkg>/openenv.yaml).
    inside_package = (folder / "__init__.py").is_file()
    for where in ((folder.parent, folder) if inside_package else (folder / "src", folder)):
        if where.is_dir() and str(where) not in sys.path:
            sys.path.insert(0, str(where))
    # `env:` (the env class) wins over `app:`, whose upstream default (server.app:app) names a
    # module that a plain env package does not have.
    if manifest.env is not None:
        return manifest.env, manifest.name, manifest.rubric, None
    app_ref = manifest.app
    if inside_package and folder.name.isidentifier() and not app_ref.startswith(f"{folder.name}."):
        # The folder is a package (upstream's env folders are: server/ imports `..models`), so its
        # app is imported as one — `<folder>.server.app:app`, the module form upstream documents —
        # and relative imports beyond server/ resolve. Apps with a `from models import` fallback
        # load the same way.
        app_ref = f"{folder.name}.{app_ref}"
    which = "" if "app" in manifest.model_fields_set else ", the default"
    hint = (f"{manifest_file} declares no `env:`, so serve imported its `app:` ({manifest.app}{which}) "
            "instead. Declare the env class there, e.g. `env: my_package.env:MyEnv`, or point `app:` "
            "at this folder's app module.")
    return app_ref, manifest.name, manifest.rubric, hint
