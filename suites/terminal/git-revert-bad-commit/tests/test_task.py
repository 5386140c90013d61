"""Verifier of git-revert-bad-commit: one new commit on the old tip undoes the port change, later changes kept."""

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


OLD_TIP = "8cd787130df41a08cc50eaf58c9c437eff3faf00"
SERVICE = "[server]\nhost = 0.0.0.0\nport = 8080\nworkers = 4\n\n[log]\nlevel = warning\n\n[metrics]\nenabled = true\n"
README = ("Start the service; it listens on port 8080.\n\nSettings live in service.ini.\n\nLicense: MIT\n"
          "Metrics are on by default.\n")

parents = git("rev-list", "--parents", "-n", "1", "refs/heads/main").split()[1:]
check(parents == [OLD_TIP], f"main's new commit must have the old tip as its only parent (parents: {parents})")
# cat-file, not show: no textconv or other filter the repository's configuration could name
for name, want in (("service.ini", SERVICE), ("README", README)):
    check(git("cat-file", "-p", f"refs/heads/main:{name}") + "\n" == want, f"{name} at main is not as expected")
check(git("diff", "HEAD", "--name-only") == "", "the working tree has uncommitted changes")
check(git("symbolic-ref", "-q", "HEAD") == "refs/heads/main", "the repository is not checked out at main")
print("ok")
