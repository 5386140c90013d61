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
"""

from __future__ import annotations

import difflib
import keyword
import re
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


def scaffold(name: str, target: Path, *, mcp: bool = False, dockerfile: bool = False) -> list[Path]:
    """Write the package for ``name`` into ``target`` (which must not exist); return the files."""
    files = render(name, mcp=mcp, dockerfile=dockerfile)
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
    out.print("Next:")
    for line in (f"cd {target}", 'uv pip install -e ".[test]"   # or pip install -e ".[test]"', "pytest",
                 f"openenv validate {name}", f"openenv serve {name}"):
        out.print(f"  {line}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``openenv init`` to ``app``."""
    app.command("init", no_args_is_help=True)(init)
