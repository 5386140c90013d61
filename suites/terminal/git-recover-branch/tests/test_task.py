"""Verifier of git-recover-branch: experiment is back at its old tip, main unchanged."""

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


MAIN = "d2f93e6ca407817d03acc333f7cd870808dfec4b"
TIP = "343bc0ec28a1f621e00e4095522fe95d1b4a6921"  # "experiment: tune cache size", from the fixed set-up

check(git("rev-parse", "refs/heads/main") == MAIN, "main was changed")
found = git("for-each-ref", "--format=%(objectname)", "refs/heads/experiment")
check(found != "", "there is no branch experiment")
check(found == TIP, f"experiment points at {found}, not at the commit that was its tip")
print("ok")
