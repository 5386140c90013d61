"""``openenv skills preview|add``: a skill file (``SKILL.md``) that teaches AI coding assistants this CLI.

The text is generated from the live command tree (every command the installed kernel and plugins
mount, with its help and options, walked through click) and from the installed plugins (the data of
``openenv plugins list``), so it describes exactly what is installed and cannot drift.

Locations are upstream's: the skill is the folder ``openenv-cli`` holding ``SKILL.md`` (YAML front
matter: ``name``, ``description``) in the central ``.agents/skills`` of the project (``~/.agents/skills``
with ``--global``); ``--claude``, ``--codex``, ``--cursor`` and ``--opencode`` link it into
``.claude/skills``, ``.codex/skills``, ``.cursor/skills`` and ``.opencode/skills`` (global:
``~/.claude/skills``, ``~/.codex/skills``, ``~/.cursor/skills``, ``~/.config/opencode/skills``).
``--dest DIR`` writes ``DIR/openenv-cli/SKILL.md`` instead.

``add`` checks every target before writing any: one that exists is refused (``--force`` replaces
it). The skill folder is written under a temp name and renamed into place; links likewise.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli.output import EXIT_USAGE, fail

__all__ = ["SKILL_ID", "app", "skill_markdown", "targets"]

SKILL_ID = "openenv-cli"
_CENTRAL = {False: Path(".agents/skills"), True: Path("~/.agents/skills")}
_AGENTS: dict[str, dict[bool, Path]] = {
    "claude": {False: Path(".claude/skills"), True: Path("~/.claude/skills")},
    "codex": {False: Path(".codex/skills"), True: Path("~/.codex/skills")},
    "cursor": {False: Path(".cursor/skills"), True: Path("~/.cursor/skills")},
    "opencode": {False: Path(".opencode/skills"), True: Path("~/.config/opencode/skills")},
}
#: The workflow, step by step; a step is written only when its command is installed.
_WORKFLOW = [
    ("init", "`openenv init NAME` scaffolds an env package that passes its own tests."),
    ("validate", "`openenv validate ENV|PATH|URL` runs the static, runtime and wire checks; fix what it reports."),
    ("serve", "`openenv serve ENV` serves an env over WebSocket, HTTP and MCP on 127.0.0.1."),
    ("run", "`openenv run ENV` starts an env through a provider and plays episodes with a simple policy."),
    ("collect", "`openenv collect ENV` plays many episodes into a dataset, with a report."),
    ("eval", "`openenv eval ENV` measures a policy on a split of the env's tasks."),
    ("build", "`openenv build PATH` builds the env's container image."),
    ("push", "`openenv push PATH` publishes it to a registry or a Hugging Face Space."),
    ("discover", "`openenv discover QUERY` finds envs, installed or in a catalog, and says how to get them."),
]

app = typer.Typer(help="Write a skill file that teaches AI coding assistants this CLI.", no_args_is_help=True)


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


# Duck-typed on purpose: typer vendors its own click (``typer._click``) in recent releases, so the
# command and parameter classes are neither click's nor one stable import path.


def _param_line(param: Any) -> str | None:
    kind = getattr(param, "param_type_name", "")
    if kind == "argument":
        need = "" if param.required else " (optional)"
        return f"- `{(param.metavar or param.name).upper()}`{need}: {_first_paragraph(param.help)}".rstrip(": ")
    if kind != "option" or getattr(param, "hidden", False) or "--help" in param.opts:
        return None
    flags = "/".join([*param.opts, *param.secondary_opts])
    value = "" if param.is_flag else f" {(param.metavar or param.name).upper()}"
    notes = [n for n in ("required" if param.required else "", "repeatable" if param.multiple else "") if n]
    tail = f" ({', '.join(notes)})" if notes else ""
    return f"- `{flags}{value}`{tail}: {_first_paragraph(param.help)}".rstrip(": ")


def _walk(command: Any, path: list[str], out: list[str]) -> None:
    if getattr(command, "hidden", False):
        return
    children = getattr(command, "commands", None)
    if isinstance(children, dict):
        for name in sorted(children):
            _walk(children[name], [*path, name], out)
        return
    out.append(f"### `{' '.join(path)}`\n")
    help_text = _first_paragraph(command.help or command.short_help)
    if help_text:
        out.append(f"{help_text}\n")
    lines = [line for line in (_param_line(p) for p in command.params) if line]
    if lines:
        out.append("\n".join(lines) + "\n")


def _version() -> str:
    try:
        return metadata.version("openenvkit")
    except metadata.PackageNotFoundError:
        return "unknown"


def skill_markdown() -> str:
    """The ``SKILL.md`` text for what is installed now."""
    import typer.main

    from openenv.cli.main import build_app
    from openenv.plugins import get_plugin_manager

    root = typer.main.get_command(build_app(None))
    names = set(getattr(root, "commands", {}))
    out = [
        "---",
        f"name: {SKILL_ID}",
        'description: "OpenEnv CLI (`openenv`): run, serve, validate, build, publish and find isolated RL '
        'environments, with the commands and plugins installed here."',
        "---",
        "",
        "# OpenEnv CLI",
        "",
        f"Generated from the installed `openenv` (openenvkit {_version()}) and its plugins by "
        "`openenv skills add`; run `openenv skills add --force` after installing or upgrading a plugin. "
        "`openenv COMMAND --help` gives every detail. Errors are one `error:` line that says what to do.",
        "",
        "## Workflow",
        "",
    ]
    out += [f"{n}. {text}" for n, text in enumerate((t for c, t in _WORKFLOW if c in names), 1)]
    out += ["", "## Commands", ""]
    body: list[str] = []
    _walk(root, ["openenv"], body)
    out.append("\n".join(body).rstrip())
    out += ["", "## Installed plugins", "", "| plugin | distribution | version | provides |", "|---|---|---|---|"]
    for info in get_plugin_manager().plugins(include_builtins=False):
        row: dict[str, Any] = info.to_json()
        provides = "; ".join(f"{kind}: {', '.join(items)}" for kind, items in row["provides"].items()) or "-"
        if row["status"] != "ok":
            provides = f"{row['status']}: {row['error'] or '-'}"
        out.append(f"| {row['name']} | {row['dist'] or '-'} | {row['version'] or '-'} | {provides.replace('|', '/')} |")
    return "\n".join(out) + "\n"


def targets(*, dest: Path | None, global_: bool, agents: list[str]) -> tuple[Path, list[Path]]:
    """The skill folder to write and the agent links to make (absolute paths)."""
    if dest is not None:
        return (dest.expanduser().absolute() / SKILL_ID), []
    central = _CENTRAL[global_].expanduser().absolute() / SKILL_ID
    return central, [_AGENTS[a][global_].expanduser().absolute() / SKILL_ID for a in agents]


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _write_skill(folder: Path, text: str) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{SKILL_ID}.", dir=folder.parent))
    try:
        (staging / "SKILL.md").write_text(text, encoding="utf-8")
        if _exists(folder):  # --force: move the old one aside, the new one in, then drop the old
            aside = folder.parent / f"{staging.name}.old"
            os.replace(folder, aside)
            os.replace(staging, folder)
            _remove(aside)
        else:
            os.replace(staging, folder)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    staging = link.parent / f".{SKILL_ID}.{os.getpid()}.link"
    staging.unlink(missing_ok=True)
    staging.symlink_to(os.path.relpath(target, link.parent))
    if link.is_dir() and not link.is_symlink():
        _remove(link)  # os.replace cannot put a link over a folder
    os.replace(staging, link)


@app.command("preview")
def preview() -> None:
    """Print the skill file (SKILL.md) for the commands and plugins installed now."""
    typer.echo(skill_markdown(), nl=False)


@app.command("add")
def add(
    claude: Annotated[bool, typer.Option("--claude", help="Link it for Claude Code (.claude/skills).")] = False,
    codex: Annotated[bool, typer.Option("--codex", help="Link it for Codex (.codex/skills).")] = False,
    cursor: Annotated[bool, typer.Option("--cursor", help="Link it for Cursor (.cursor/skills).")] = False,
    opencode: Annotated[bool, typer.Option("--opencode", help="Link it for OpenCode (.opencode/skills).")] = False,
    global_: Annotated[bool, typer.Option(
        "--global", "-g", help="Install for your user (~/.agents/skills) instead of this project.")] = False,
    dest: Annotated[Path | None, typer.Option(
        "--dest", help="Write DEST/openenv-cli/SKILL.md instead (no agent links).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a skill or link that exists.")] = False,
) -> None:
    """Install the skill in .agents/skills/openenv-cli (and link it for the assistants named)."""
    agents = [name for name, on in (("claude", claude), ("codex", codex), ("cursor", cursor),
                                    ("opencode", opencode)) if on]
    if dest is not None and (agents or global_):
        fail("--dest writes one folder of your choice: drop --claude/--codex/--cursor/--opencode/--global, "
             "or drop --dest.", EXIT_USAGE)
    folder, links = targets(dest=dest, global_=global_, agents=agents)
    existing = [p for p in [folder, *links] if _exists(p)]
    if existing and not force:
        fail(f"{', '.join(str(p) for p in existing)} exists: run again with --force to replace it "
             "(`openenv skills preview` shows the new text).", EXIT_USAGE)
    blocked = [p for p in [folder, *links] if any(parent.is_file() for parent in p.parents)]
    if blocked:
        fail(f"{blocked[0]}: a file stands where a folder is needed on that path; move it, or use --dest.",
             EXIT_USAGE)
    text = skill_markdown()
    try:
        _write_skill(folder, text)
        for link in links:
            _link(link, folder)
    except OSError as exc:
        fail(f"cannot write {exc.filename or folder}: {exc.strerror or exc}.")
    typer.echo(f"wrote {folder / 'SKILL.md'}")
    for link in links:
        typer.echo(f"linked {link} -> {folder}")
