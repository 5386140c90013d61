"""Verifier of git-autosquash: feature is three commits on the old fork point with the squashed contents."""

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


MAIN = "90c66b4f345d74a0bb6d6ff612f51314624cfa81"
FORK = "c0590c5b631545ab97ba08c18564800d2c3265ae"
# (subject, tree) of each commit of feature after the squash, oldest first: the trees follow from
# the files alone, whatever tool did the squash.
WANT = [
    ("Add parser", "2529b6090e4963a5f1e6837088f3bf8101b56adc"),
    ("Add CLI", "3616ef1add95243840368f76223c798f7e4b7e99"),
    ("Add usage notes", "0539fdca2ee771764c5319ed5101febd6d0d40d0"),
]

check(git("rev-parse", "refs/heads/main") == MAIN, "main was changed")
lines = git("log", "--reverse", "--format=%T %s", f"{FORK}..refs/heads/feature").splitlines()
got = [(line[41:], line[:40]) for line in lines]
check([s for s, _ in got] == [s for s, _ in WANT], f"feature's commits are {[s for s, _ in got]!r}")
check(got == WANT, "a squashed commit does not hold the expected files")
first = git("rev-list", "--reverse", f"{FORK}..refs/heads/feature").split()[0]
check(git("rev-parse", f"{first}^") == FORK, "feature no longer forks from its original fork point")
print("ok")
