"""The ``openenv.yaml`` manifest: what an environment package says about itself.

The model keeps upstream OpenEnv's fields (``spec_version``, ``name``, ``type``, ``runtime``,
``app``, ``port``) and adds optional ones that ``openenv validate``, ``openenv envs search/show``
and ``openenv serve`` read (``description``, ``version``, ``tags``, ``examples``, ``env``,
``reward_range``, ``oracle``, ``oracle_margin``, ``max_episode_steps``, ``step_budget_s``,
``reset_budget_s``, ``volatile_fields``, ``tools``, ``provider``, ``rubric``, ``sandbox``,
``tasks``). Every field is
described in ``docs/manifest.md``.
Unknown top-level keys (upstream's ``validation:``, ``variables:``…) are kept, not refused, so any
upstream manifest loads unchanged.

Promises:

* ``load_manifest(path)`` returns a ``Manifest`` or raises ``ManifestError`` whose message names
  the file, the offending field (or YAML line) and what to write instead. It never imports code.
* ``locate_manifest(value, relative_to=...)`` turns the ``manifest=`` extra of an env registration
  into a file path without importing the env's package.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic import ValidationError as PydanticValidationError

from openenv.errors import ConfigError

__all__ = ["MANIFEST_FILENAME", "Manifest", "ManifestError", "SandboxNeeds", "TasksSpec", "load_manifest",
           "locate_manifest", "parse_manifest", "without_fields"]

MANIFEST_FILENAME = "openenv.yaml"


class ManifestError(ConfigError):
    """An ``openenv.yaml`` is missing, is not valid YAML, or has invalid fields."""


class SandboxNeeds(BaseModel):
    """``sandbox:``: what an env that runs untrusted code (in ``openenv_sandbox``) asks of container
    providers. Only envs that declare it get any of it; docs/manifest.md and docs/security.md say
    what each setting grants and why."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key must not silently drop a protection

    #: Start the server as root holding exactly CAP_SETUID, CAP_SETGID and CAP_CHOWN (nothing else),
    #: so that the sandbox runs each execution as its own unprivileged uid.
    drop_privileges: bool = False
    #: gVisor's ``runsc``: ``auto`` uses it when the engine has the runtime, ``required`` refuses to
    #: start without it, ``off`` never uses it.
    gvisor: Literal["auto", "required", "off"] = "auto"


class TasksSpec(BaseModel):
    """``tasks:``: where the env's tasks come from (docs/manifest.md), exactly one of ``file``
    (relative to the package folder: ``.jsonl``, ``.parquet`` or a ``datasets`` folder) and
    ``seeds`` (split -> ``[start, stop)``; each task is ``(config, seed)``)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt key would silently serve no tasks

    file: str | None = None
    seeds: dict[str, tuple[int, int]] | None = None
    #: Passed to every seed task as its ``data`` (``seeds`` only).
    config: dict[str, Any] = Field(default_factory=dict)
    #: Types of splits whose name does not say it, e.g. ``{dev: validation}``.
    split_types: dict[str, Literal["train", "validation", "test"]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> TasksSpec:
        if (self.file is None) == (self.seeds is None):
            raise ValueError("give exactly one of 'file' (e.g. file: tasks.jsonl) and 'seeds' "
                             "(e.g. seeds: {train: [0, 10000], test: [1000000, 1000500]})")
        if self.config and self.file is not None:
            raise ValueError("'config' applies to seed tasks only; put per-task data in the file's rows")
        return self


class Manifest(BaseModel):
    """The fields of ``openenv.yaml``. Only ``name`` is required; the rest default as upstream's
    template does (``spec_version: 1``, ``type: space``, ``runtime: fastapi``,
    ``app: server.app:app``, ``port: 8000``)."""

    model_config = ConfigDict(extra="allow")

    spec_version: int = 1
    name: str = Field(min_length=1)
    type: str = "space"
    runtime: str = "fastapi"
    app: str = "server.app:app"
    port: int = Field(default=8000, ge=1, le=65535)
    description: str | None = None
    version: str | None = None
    tags: list[str] = Field(default_factory=list)
    #: Example queries a user might type to find this env (``openenv envs search``).
    examples: list[str] = Field(default_factory=list)
    #: ``module:Class`` of the env; lets ``openenv validate PATH`` run a package that is not installed.
    env: str | None = None
    #: Inclusive ``[low, high]`` every reward lies in (checked by ``openenv validate``).
    reward_range: tuple[float, float] | None = None
    #: ``module:function`` taking an observation (dict) and returning an action (dict).
    oracle: str | None = None
    #: How much more mean episode reward the oracle must earn than a random policy.
    oracle_margin: float = 0.0
    #: Steps after which ``openenv validate`` stops an episode that has not ended.
    max_episode_steps: int = Field(default=200, ge=1)
    #: Seconds one ``step`` / ``reset`` may take (checked by ``openenv validate``).
    step_budget_s: float = Field(default=1.0, gt=0)
    reset_budget_s: float = Field(default=5.0, gt=0)
    #: Observation fields that legitimately differ between two runs of the same seed (wall-clock
    #: timings, per-session paths); ``openenv validate``'s determinism check ignores them at any depth.
    volatile_fields: list[str] = Field(default_factory=list)
    #: Tool names a tool env declares (checked against the env's ``@tool`` methods).
    tools: list[str] = Field(default_factory=list)
    #: Hints for providers, e.g. ``{"docker": {"image": ...}, "max_sessions": 8}`` (shown, not enforced).
    provider: dict[str, Any] = Field(default_factory=dict)
    #: The env's rubric, ``NAME[=CONFIG]`` from the rubric registry (``openenv rubrics list``); the
    #: server scores every step with it (``openenv serve --rubric`` replaces it).
    rubric: str | None = None
    #: What the env's code sandbox needs from container providers (``SandboxNeeds``); none by default.
    sandbox: SandboxNeeds | None = None
    #: The env's tasks and splits (``TasksSpec``); ``openenv.tasks.tasks_of`` reads it.
    tasks: TasksSpec | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, value: Any) -> Any:
        # YAML reads `version: 1.0` as a float; a version is text, so accept and keep it as such.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("app")
    @classmethod
    def _app_is_reference(cls, value: str) -> str:
        module, sep, attr = value.partition(":")
        if not (sep and module and attr):
            raise ValueError("must be 'module.path:attribute', e.g. 'server.app:app'")
        return value

    @field_validator("env", "oracle")
    @classmethod
    def _optional_reference(cls, value: str | None) -> str | None:
        if value is None:
            return value
        module, sep, attr = value.partition(":")
        if not (sep and module and attr):
            raise ValueError("must be 'module.path:attribute', e.g. 'my_env.env:MyEnv'")
        return value

    @field_validator("reward_range")
    @classmethod
    def _ordered_range(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and value[0] > value[1]:
            raise ValueError(f"low {value[0]} is above high {value[1]}: write [low, high]")
        return value


def parse_manifest(data: Any, *, source: str = MANIFEST_FILENAME,
                   lines: dict[str, int] | None = None) -> Manifest:
    """Validate already-parsed YAML ``data``; ``source`` names the file in error messages and
    ``lines`` (top-level key -> 1-based line) adds the line of each offending field."""
    if not isinstance(data, dict):
        raise ManifestError(
            f"{source}: the manifest must be a YAML mapping (key: value lines), got "
            f"{type(data).__name__}. Start from `name: my_env` and `spec_version: 1`."
        )
    try:
        return Manifest.model_validate(data)
    except PydanticValidationError as exc:
        found = lines or {}

        def where(loc: tuple[Any, ...]) -> str:
            line = found.get(str(loc[0])) if loc else None
            return f" (line {line})" if line else ""

        problems = "; ".join(
            f"'{'.'.join(str(p) for p in err['loc']) or '<root>'}'{where(err['loc'])}: {err['msg']}"
            for err in exc.errors()
        )
        raise ManifestError(f"{source}: invalid manifest: {problems}. Fix these fields.") from None


def load_manifest(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate the manifest file at ``path``."""
    import yaml  # only when a manifest is actually read

    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(
            f"Manifest not found: {file}. Create it (at least `name:`), or fix the `manifest=` "
            "path given at registration."
        ) from None
    except OSError as exc:
        raise ManifestError(f"Cannot read manifest {file}: {exc.strerror or exc}.") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(f"{file}: not valid YAML{where}: {problem}.") from None
    return parse_manifest(data, source=str(file), lines=_key_lines(text))


def _key_lines(text: str) -> dict[str, int]:
    """Line (1-based) of every top-level key of a YAML mapping document; empty if not one."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {str(key.value): key.start_mark.line + 1 for key, _ in node.value}


def locate_manifest(value: str | os.PathLike[str], *, relative_to: Path | None = None) -> Path:
    """Resolve the ``manifest=`` extra of an env registration to a path, importing nothing.

    Accepted forms:

    * an absolute path;
    * ``"package.sub:relative/file.yaml"`` — a file inside an installed package (found through
      the import system's finder, which does not execute the package);
    * a relative path — relative to ``relative_to`` (the registering plugin module's folder),
      or to the current directory when that is unknown.
    """
    text = os.fspath(value)
    package, sep, resource = text.partition(":")
    # "C:\\x" on Windows has a colon too; a package name never contains a path separator.
    if sep and package and resource and "/" not in package and "\\" not in package:
        top, *subpackages = package.split(".")
        spec = importlib.util.find_spec(top)
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not locations:
            raise ManifestError(
                f"Manifest reference {text!r}: package '{top}' is not installed (or is not a "
                "package). Install it, or register an absolute path instead."
            )
        return Path(locations[0]).joinpath(*subpackages, resource)
    path = Path(text)
    if path.is_absolute():
        return path
    return (relative_to or Path.cwd()) / path


def without_fields(value: Any, names: set[str] | frozenset[str]) -> Any:
    """``value`` with every mapping key in ``names`` dropped, at any depth (lists walked too): what
    a manifest's ``volatile_fields`` leave out when equal-seed episodes are compared (``EnvContract``,
    ``openenv validate``) and of the Gymnasium adapter's ``info``."""
    if not names:
        return value
    if isinstance(value, dict):
        return {k: without_fields(v, names) for k, v in value.items() if k not in names}
    if isinstance(value, list):
        return [without_fields(v, names) for v in value]
    return value
