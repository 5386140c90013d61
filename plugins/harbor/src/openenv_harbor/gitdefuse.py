"""What keeps a git repository the agent left in ``/app`` from running a command while the verifier
grades it, in every runtime (local, Docker, Kubernetes): the grader's environment forces the git
settings that name a command (``GIT_CONFIG_*`` outranks every config file), and the snapshot the
grader sees has no hooks and none of the config sections that can run one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["EXEC_SECTIONS", "FORCED", "defuse_tree", "defused_config", "forced_env"]

#: Git settings forced on the verifier: a hook, an fsmonitor command, a pager, an editor or an ssh
#: command planted in the agent's repository must not run while grading.
FORCED = {"core.hooksPath": "/dev/null", "core.fsmonitor": "false", "core.pager": "cat",
          "core.sshCommand": "false", "diff.external": "", "core.editor": "false"}
#: Sections of a repository's .git/config that can make git run a command: dropped from the snapshot.
EXEC_SECTIONS = re.compile(r'^\s*\[\s*(filter|alias|include|includeif|credential|diff|merge)\b', re.I)


def forced_env() -> dict[str, str]:
    """The ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n`` variables of :data:`FORCED`."""
    env = {"GIT_CONFIG_COUNT": str(len(FORCED))}
    for index, (key, value) in enumerate(FORCED.items()):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    return env


def defused_config(text: str) -> str:
    """A .git/config without its command-running sections (:data:`EXEC_SECTIONS`)."""
    kept, dropping = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("["):
            dropping = bool(EXEC_SECTIONS.match(line))
        if not dropping:
            kept.append(line)
    return "\n".join(kept) + "\n"


def defuse_tree(app: Path) -> None:
    """Drop the hooks and command-running config of every git repository in ``app`` (a snapshot, never
    the agent's own folder); a hooks folder or config that is a symlink is removed too."""
    for git_dir in [p for p in app.rglob(".git") if p.is_dir() and not p.is_symlink()]:
        hooks = git_dir / "hooks"
        if hooks.is_symlink() or hooks.is_file():
            hooks.unlink()
        elif hooks.is_dir():
            shutil.rmtree(hooks)
        config = git_dir / "config"
        if config.is_symlink():
            config.unlink()
        elif config.is_file():
            config.write_text(defused_config(config.read_text(encoding="utf-8", errors="replace")), encoding="utf-8")
