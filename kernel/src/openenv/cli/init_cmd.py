"""``openenv init NAME``: scaffold a separately installable env plugin package.

The package (folder ``NAME`` in the current directory, or ``--dir PATH``) has a pyproject with the
``openenv`` entry point, typed models, the env, an ``openenv.yaml`` (reward range, oracle, budgets),
tests that run ``openenv.testing.EnvContract``, a README and, with ``--dockerfile``, a Dockerfile
for a plain ``docker build``. ``--mcp`` makes a tool env (``openenv.tools.ToolEnvironment``)
instead of the plain typed one. Once installed it passes its own tests and ``openenv validate
NAME``, and ``openenv serve NAME`` serves it.

The templates are the text files under ``openenv/scaffold`` (see its README for the placeholders).

Rules (each an ``error:`` line, exit code 2, nothing written):

* ``NAME`` is a lower-case Python identifier (``[a-z][a-z0-9_]*``), not a Python keyword and not a
  control name (``reset``, ``step``...);
* a name equal to, or within a typo of, an installed env's name is refused with "did you mean"
  (an env named like an installed one would shadow it or be shadowed);
* the target folder must not exist: nothing is ever overwritten.

Inside a uv workspace (``[tool.uv.workspace]`` in a ``pyproject.toml`` above the target) whose
``members`` take the new folder (``openenv init my_game --dir envs/my_game`` in a checkout of
OpenEnv), the package's dependencies that are workspace members (the kernel, the ws transport)
get a ``[tool.uv.sources]`` entry ``{ workspace = true }``: uv refuses a member that depends on
another member without one, and that refusal would break ``uv sync`` for the whole workspace.
"""

from __future__ import annotations

import difflib
import fnmatch
import keyword
import re
import tomllib
from glob import glob
from pathlib import Path
from typing import Annotated

import typer

from openenv.cli._output import EXIT_USAGE, console, fail

__all__ = ["check_name", "register", "render", "scaffold"]

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
_SCAFFOLD = Path(__file__).resolve().parent.parent / "scaffold"


def check_name(name: str, installed: list[str]) -> str | None:
    """Why ``name`` cannot be a new env's name (``None``: it can)."""
    from openenv.env import CONTROL_NAMES

    if not _NAME.match(name):
        suggestion = re.sub(r"[^a-z0-9_]", "_", name.lower()).strip("_")
        if suggestion and not suggestion[0].isalpha():
            suggestion = "env_" + suggestion
        hint = f" Did you mean '{suggestion}'?" if suggestion and _NAME.match(suggestion) else ""
        return (f"'{name}' is not a valid env name: use lower-case letters, digits and underscores, "
                f"starting with a letter (it becomes the Python package openenv_env_<name>).{hint}")
    if keyword.iskeyword(name) or name in CONTROL_NAMES:
        return f"'{name}' is reserved (a Python keyword or a control name). Pick another name, e.g. '{name}_env'."
    if name in installed:
        return (f"an env named '{name}' is already installed; a second one would conflict with it. "
                f"Pick another name, e.g. 'my_{name}'.")
    close = difflib.get_close_matches(name, installed, n=1, cutoff=0.85)
    if close:
        return (f"'{name}' is nearly the name of the installed env '{close[0]}' — did you mean to use "
                f"'{close[0]}' (`openenv envs show {close[0]}`)? Pick a clearly different name otherwise.")
    return None


def _substitutions(name: str) -> dict[str, str]:
    return {"__pkg__": f"openenv_env_{name}", "__dist__": "openenvkit-env-" + name.replace("_", "-"),
            "__Class__": "".join(part.capitalize() for part in name.split("_")), "__name__": name}


def _apply(text: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        text = text.replace(key, value)
    return text


def render(name: str, *, mcp: bool = False, dockerfile: bool = False) -> dict[str, str]:
    """Relative path -> content of every file of the scaffold for ``name``."""
    subs = _substitutions(name)
    files: dict[str, str] = {}
    for variant in ("common", "mcp" if mcp else "plain"):
        root = _SCAFFOLD / variant
        for file in sorted(root.rglob("*.tmpl")):
            rel = _apply(file.relative_to(root).as_posix(), subs).removesuffix(".tmpl")
            if rel == "Dockerfile" and not dockerfile:
                continue
            files[rel] = _apply(file.read_text(encoding="utf-8"), subs)
    return files


def _dist_key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(pyproject: dict[str, object]) -> list[str]:
    project = pyproject.get("project")
    if not isinstance(project, dict):
        return []
    reqs = list(project.get("dependencies") or [])
    for extra in (project.get("optional-dependencies") or {}).values():
        reqs.extend(extra)
    names = (re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", str(r)) for r in reqs)
    return list(dict.fromkeys(m.group(1) for m in names if m))


def workspace_sources(target: Path, pyproject_text: str) -> list[str]:
    """The dependencies of the package about to be written at ``target`` that are members of the
    uv workspace whose ``members`` take ``target`` (``[]`` when there is no such workspace)."""
    target = target.resolve()
    for folder in target.parents:
        file = folder / "pyproject.toml"
        if not file.is_file():
            continue
        try:
            root = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        workspace = ((root.get("tool") or {}).get("uv") or {}).get("workspace")
        if workspace is None:
            continue  # a plain project above the target: keep looking for the workspace root
        patterns = [str(p).rstrip("/") for p in workspace.get("members") or []]
        rel = target.relative_to(folder.resolve()).as_posix()
        if not any(fnmatch.fnmatchcase(rel, pattern) for pattern in patterns):
            return []  # under the workspace's folder but not one of its members: uv leaves it alone
        members: set[str] = set()
        for pattern in patterns:
            for match in glob(str(folder / pattern)):
                try:
                    data = tomllib.loads((Path(match) / "pyproject.toml").read_text(encoding="utf-8"))
                except (OSError, tomllib.TOMLDecodeError):
                    continue
                name = (data.get("project") or {}).get("name")
                if name:
                    members.add(_dist_key(name))
        wanted = _requirement_names(tomllib.loads(pyproject_text))
        return [name for name in wanted if _dist_key(name) in members]
    return []


def scaffold(name: str, target: Path, *, mcp: bool = False, dockerfile: bool = False) -> list[Path]:
    """Write the package for ``name`` into ``target`` (which must not exist); return the files."""
    files = render(name, mcp=mcp, dockerfile=dockerfile)
    sources = workspace_sources(target, files["pyproject.toml"])
    if sources:
        files["pyproject.toml"] += (
            "\n# This package is a member of the uv workspace above it: its OpenEnv dependencies come from\n"
            "# the workspace's own members, not from a package index.\n[tool.uv.sources]\n"
            + "".join(f"{dep} = {{ workspace = true }}\n" for dep in sources))
    target.mkdir(parents=True)
    written = []
    for rel, content in files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written


def init(
    name: Annotated[str, typer.Argument(help="The env's name (lower-case identifier), e.g. my_game.")],
    mcp: Annotated[bool, typer.Option("--mcp", help="A tool env (MCP tools) instead of a typed-action env.")] = False,
    directory: Annotated[Path | None, typer.Option("--dir", help="Folder to create (default: ./NAME).",
                                                   show_default=False)] = None,
    dockerfile: Annotated[bool, typer.Option("--dockerfile",
                                             help="Also write a Dockerfile for `docker build`.")] = False,
    force_name: Annotated[bool, typer.Option("--allow-similar-name",
                                             help="Accept a name close to an installed env's.")] = False,
) -> None:
    """Create a new env package (installable plugin, tests, manifest) that passes `openenv validate`."""
    from openenv.plugins import get_plugin_manager

    installed = [] if force_name else list(get_plugin_manager().catalog.envs.names())
    problem = check_name(name, installed)
    if problem is not None:
        fail(problem, EXIT_USAGE)
    target = directory if directory is not None else Path(name)
    if target.exists():
        fail(f"{target} already exists; `openenv init` never overwrites. Pick another --dir, or remove "
             f"{target} first.", EXIT_USAGE)
    written = scaffold(name, target, mcp=mcp, dockerfile=dockerfile)
    out = console()
    out.print(f"Created {target} ({len(written)} files): a {'tool (MCP)' if mcp else 'typed'} env '{name}'.")
    in_workspace = "[tool.uv.sources]" in (target / "pyproject.toml").read_text(encoding="utf-8")
    if in_workspace:
        out.print("It is a member of the uv workspace above it (its pyproject.toml takes the OpenEnv "
                  "packages from the workspace).", markup=False, highlight=False)
    steps = ((f"uv sync --all-packages   # installs {target} editable with the workspace", "uv run pytest "
              f"{target}", f"uv run openenv validate {name}", f"uv run openenv serve {name}") if in_workspace else
             (f"cd {target}", 'uv pip install -e ".[test]"   # or pip install -e ".[test]"', "pytest",
              f"openenv validate {name}", f"openenv serve {name}"))
    out.print("Next:")
    for line in steps:
        out.print(f"  {line}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``openenv init`` to ``app``."""
    app.command("init", no_args_is_help=True)(init)
