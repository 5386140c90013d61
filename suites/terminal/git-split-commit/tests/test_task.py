"""Verifier of git-split-commit: two commits, each touching only its path, on the untouched history."""

from __future__ import annotations

import os
import subprocess
import sys

# The grader reads the agent's repository as another user and must not run anything it configured
# (fsmonitor, pager, hooks): only plumbing, with safe.directory opened for that one purpose.
ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_PAGER": "cat",
       "GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*",
       "GIT_CONFIG_KEY_1": "core.fsmonitor", "GIT_CONFIG_VALUE_1": "false"}


def git(*args: str) -> str:
    """git in /app/repo; a failure fails the check (a broken repository scores 0)."""
    r = subprocess.run(["git", "-C", "/app/repo", *args], capture_output=True, text=True, env=ENV, timeout=60)
    if r.returncode:
        sys.exit(f"FAIL: git {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout.strip()


def check(ok: bool, message: str) -> None:
    if not ok:
        sys.exit(f"FAIL: {message}")


BASE = "59f1ea13cbf6ce5a74e16b3dae08ee0c35490239"  # "Add Makefile"
TREE = "e5940e8629e4a7a335bb78c7ae6f7dd5ccc085ef"  # the files of the original last commit

check(git("rev-parse", "refs/heads/main~2") == BASE, "the commits before the split one changed")
check(git("rev-parse", "refs/heads/main^{tree}") == TREE, "main does not end with the original files")
for rev, subject, path in [("main~1", "Fix buffer overflow in append", "src/buffer.c"),
                           ("main", "Document the size limit", "docs/usage.md")]:
    check(git("log", "-1", "--format=%s", rev) == subject, f"{rev} has not the subject {subject!r}")
    changed = git("diff-tree", "--no-commit-id", "--name-only", "-r", rev).split()
    check(changed == [path], f"{rev} changes {changed!r}, expected only {path}")
check(len(git("rev-list", "--parents", "-n", "1", "main").split()) == 2, "main's tip must have one parent")
check(git("diff", "HEAD", "--name-only") == "", "the working tree has uncommitted changes")
print("ok")
