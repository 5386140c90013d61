"""Every ``--flag`` a hint, help text or doc names exists on the command it names.

Two scans, against the options of the real command tree (``build_app(None)`` mounts every installed
plugin's commands too):

* ``openenv CMD [SUB] ... --flag`` anywhere (Python string literals of the kernel, plugins and envs;
  README.md and the docs): each flag must be an option of that command.
* A Python string that reads as a sentence and names no other tool (uv, pip, docker, …): each flag
  in it must be an option of *some* ``openenv`` command, so a hint cannot send a user to a flag
  that no command has (as ``--image`` once did).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: ``openenv`` followed by command words, then the rest of that command line (up to a backtick, a
#: quote, a newline, a pipe or a shell separator).
_SPAN = re.compile(r"openenv((?:[ \t]+[a-z][a-z0-9_-]*)+)([^`\n\"'|&;]*)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Strings naming these tools talk about their flags, not ours.
_FOREIGN = re.compile(r"\b(uv|pip|docker|dockerd|podman|Dockerfile|ray|git|pytest|nox|debootstrap|uvicorn|"
                      r"kubectl|apt-get|python3?|tar|bwrap|bubblewrap|sbatch|srun|squeue|scancel|[Ss]lurm)\b(?!\.)")


def _command_options() -> dict[tuple[str, ...], set[str]]:
    import typer.main

    from openenv.cli.main import build_app

    found: dict[tuple[str, ...], set[str]] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        opts = set()
        for param in getattr(command, "params", []):
            if getattr(param, "param_type_name", "") == "option":
                opts.update([*param.opts, *param.secondary_opts])
        found[path] = opts | {"--help", "-h"}
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(build_app(None)), ())
    return found


COMMANDS = _command_options()
#: Command groups (``providers``): a flag after one belongs to a sub-command the scan may not see
#: (``openenv providers {verb} --provider``), so only full command paths are checked.
GROUPS = {path[:-1] for path in COMMANDS if path}
EVERY = set().union(*COMMANDS.values())


def _python_strings(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):  # an f-string: its literal parts, "{}" for each value
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def _problems(where: str, text: str, *, sentence_rule: bool) -> list[str]:
    text = text.replace("\\\n", " ")
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    for match in _SPAN.finditer(text):
        words = match.group(1).split()
        path: tuple[str, ...] = ()
        for word in words:
            if (*path, word) not in COMMANDS:
                break
            path = (*path, word)
        if not path or path in GROUPS:
            continue
        spans.append((match.start(), match.end()))
        rest = " ".join(words[len(path):]) + match.group(2)
        out.extend(f"{where}: `openenv {' '.join(path)}` has no option {flag}"
                   for flag in _FLAG.findall(rest) if flag not in COMMANDS[path])
    stripped = text.strip()
    if sentence_rule and " " in stripped and not stripped.startswith("-") and not _FOREIGN.search(text):
        for match in _FLAG.finditer(text):
            inside = any(a <= match.start() < b for a, b in spans)
            if not inside and match.group() not in EVERY:
                out.append(f"{where}: no openenv command has {match.group()}")
    return out


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("kernel/src/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py"),
                   *ROOT.glob("envs/*/src/**/*.py")])


def _docs() -> list[Path]:
    return sorted([ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("plugins/*/README.md"),
                   *ROOT.glob("envs/*/README.md")])


def test_the_command_tree_is_complete() -> None:
    """Premise: the scan sees the plugin commands and their options (else it could pass vacuously)."""
    assert {("push",), ("build",), ("run",), ("serve",), ("validate",), ("providers", "ps")} <= set(COMMANDS)
    assert "--registry" in COMMANDS[("push",)] and "--episodes" in COMMANDS[("run",)]


def test_the_scan_catches_a_made_up_flag() -> None:
    assert _problems("x", "pass it with `openenv push . --bogus-flag`", sentence_rule=False)
    assert _problems("x", "or name an image with --image-ref / LaunchSpec(image=...)", sentence_rule=True)
    assert not _problems("x", "`openenv push . --registry R --dry-run`", sentence_rule=False)
    assert not _problems("x", "run `uv sync --all-packages` first", sentence_rule=True)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_named_in_source_strings_exists(path: Path) -> None:
    problems = [p for line, text in _python_strings(path)
                for p in _problems(f"{path.relative_to(ROOT)}:{line}", text, sentence_rule=True)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", _docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_flag_named_in_the_docs_exists(path: Path) -> None:
    problems = _problems(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), sentence_rule=False)
    assert not problems, "\n".join(problems)


def test_the_build_failure_hint_names_options_of_build_and_push() -> None:
    """``openenv push PATH`` builds first, so a failed build's hint is read after ``push`` too."""
    from collections import deque

    from openenv_provider_docker.build import _build_failure

    hint = _build_failure("t", "pull access denied for python", deque())
    flags = set(_FLAG.findall(hint.split("e.g.")[0]))  # after "e.g.": debootstrap's own flags
    assert flags, hint
    for command in (("build",), ("push",)):
        assert flags <= COMMANDS[command], (command, flags - COMMANDS[command])
