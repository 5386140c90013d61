"""Verifier of git-fix-author: main is the exact rewrite (same dates, messages, trees) and no ref
reaches the old identity."""

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


# A rewrite that changes only the identity gives byte-identical commit objects whatever the tool.
REWRITTEN_MAIN = "44375f45e6bddca82b5ea544046ed991addded06"

check(git("rev-parse", "refs/heads/main") == REWRITTEN_MAIN,
      "main is not the expected rewrite (identity, dates, messages, contents or order differ)")
identities = git("log", "--all", "--format=%an <%ae> %cn <%ce>")
check("old-laptop.local" not in identities, "a ref still reaches a commit with the old identity")
print("ok")
