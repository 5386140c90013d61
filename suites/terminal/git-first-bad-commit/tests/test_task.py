"""Verifier of git-first-bad-commit: the hash of the first failing commit; main intact and checked out."""

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


from pathlib import Path  # noqa: E402

MAIN = "d9ea7f4ce1230a9e320df24dfe8ea3e2b173c4ca"
FIRST_BAD = "71f4edf41175b7dc402cfb5909c6d2e80dfaa05c"  # "Implement mul without the * operator"

answer = Path("/app/first_bad.txt")
check(answer.is_file(), "/app/first_bad.txt was not written")
lines = answer.read_text().split()
check(lines == [FIRST_BAD], f"first_bad.txt holds {lines!r}, not the first failing commit")
check(git("rev-parse", "refs/heads/main") == MAIN, "main was changed")
check(git("symbolic-ref", "-q", "HEAD") == "refs/heads/main", "the repository is not checked out at main")
print("ok")
