"""``openenv skills preview|add``: the text follows the live command tree and the installed plugins;
``add`` writes upstream's locations, refuses what exists without ``--force`` and writes nothing then."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import Result

from openenv.cli.main import build_app
from openenv.hookspecs import hookimpl
from openenv.plugins import PluginManager

_extra = typer.Typer(help="A command group of a plugin installed for this test.")


@_extra.command("frobnicate")
def _frobnicate(
    level: int = typer.Option(3, "--level", "-l", help="How hard to frobnicate."),
    target: str = typer.Argument(..., help="What to frobnicate."),
) -> None:
    """Frobnicate a target, for the skill test."""


class _ExtraCommands:
    @hookimpl
    def openenv_register_commands(self, registry: object) -> None:
        registry.register("widget", f"{__name__}:_extra", description="Widgets.")  # type: ignore[attr-defined]


def _leaves(command: object, path: list[str]) -> list[tuple[str, object]]:
    children = getattr(command, "commands", None)
    if isinstance(children, dict):
        return [leaf for name in sorted(children) for leaf in _leaves(children[name], [*path, name])]
    return [(" ".join(path), command)]


def test_preview_describes_every_live_command_and_plugin(openenv: Callable[..., Result],
                                                         catalog_only: PluginManager) -> None:
    catalog_only.register(_ExtraCommands(), name="widgets")
    result = openenv("skills", "preview")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("---\nname: openenv-cli\ndescription: \"OpenEnv CLI")
    leaves = _leaves(typer.main.get_command(build_app(None)), ["openenv"])
    assert len(leaves) > 10
    for path, command in leaves:
        assert f"### `{path}`\n" in text, path
        for param in command.params:  # type: ignore[attr-defined]
            # A hidden option is left out on purpose, as --help leaves it out.
            if param.param_type_name == "option" and "--help" not in param.opts and not param.hidden:
                for flag in param.opts:
                    assert flag in text, (path, flag)
    # The plugin installed for this test shows up with its command, its options and its help.
    assert "### `openenv widget frobnicate`\n\nFrobnicate a target, for the skill test." in text
    assert "- `--level/-l LEVEL`: How hard to frobnicate." in text
    assert "- `TARGET`: What to frobnicate." in text
    assert "| catalog | " in text and "command: catalog, discover, fork, skills" in text
    assert "| widgets | - | - | command: widget |" in text
    # A workflow step is written only when its command is installed (no `collect` here).
    assert "`openenv discover QUERY`" in text and "`openenv collect ENV`" not in text


def test_add_writes_the_central_skill_and_links_for_each_assistant(
        openenv: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = openenv("skills", "add", "--claude", "--codex")
    assert result.exit_code == 0, result.output
    skill = tmp_path / ".agents/skills/openenv-cli/SKILL.md"
    assert skill.read_text(encoding="utf-8") == openenv("skills", "preview").stdout
    for agent in ("claude", "codex"):
        link = tmp_path / f".{agent}/skills/openenv-cli"
        assert link.is_symlink() and os.readlink(link) == "../../.agents/skills/openenv-cli"
        assert (link / "SKILL.md").read_text(encoding="utf-8") == skill.read_text(encoding="utf-8")
    assert not (tmp_path / ".cursor").exists()
    assert sorted(p.name for p in skill.parent.parent.iterdir()) == ["openenv-cli"]  # no temp folder left


def test_add_refuses_what_exists_and_writes_nothing(openenv: Callable[..., Result], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    skill = tmp_path / ".agents/skills/openenv-cli/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("my own edits\n", encoding="utf-8")
    refused = openenv("skills", "add", "--cursor")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (f"error: {skill.parent} exists: run again with --force to replace it "
                                      "(`openenv skills preview` shows the new text).")
    assert skill.read_text(encoding="utf-8") == "my own edits\n"
    assert not (tmp_path / ".cursor").exists()  # nothing half-done: not even the link

    forced = openenv("skills", "add", "--cursor", "--force")
    assert forced.exit_code == 0, forced.output
    assert skill.read_text(encoding="utf-8").startswith("---\nname: openenv-cli\n")
    assert (tmp_path / ".cursor/skills/openenv-cli").is_symlink()
    assert sorted(p.name for p in skill.parent.parent.iterdir()) == ["openenv-cli"]


def test_dest_and_global(openenv: Callable[..., Result], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    out = openenv("skills", "add", "--dest", str(tmp_path / "mine"))
    assert out.exit_code == 0, out.output
    assert (tmp_path / "mine/openenv-cli/SKILL.md").is_file()
    both = openenv("skills", "add", "--dest", str(tmp_path / "other"), "--claude")
    assert both.exit_code == 2 and "drop --dest" in both.stderr and not (tmp_path / "other").exists()
    glob = openenv("skills", "add", "--global", "--opencode")
    assert glob.exit_code == 0, glob.output
    assert (tmp_path / "home/.agents/skills/openenv-cli/SKILL.md").is_file()
    assert (tmp_path / "home/.config/opencode/skills/openenv-cli/SKILL.md").is_file()
    assert not (tmp_path / ".agents").exists()


def test_a_file_in_the_way_is_one_line(openenv: Callable[..., Result], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".claude").write_text("not a folder", encoding="utf-8")
    result = openenv("skills", "add", "--claude")
    assert result.exit_code == 2
    assert "a file stands where a folder is needed" in result.stderr
    assert not (tmp_path / ".agents").exists()
