"""Verifier of git-tag-releases: three annotated tags on the release commits, the stray tag gone, main unchanged."""

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


# The set-up builds the same commits on every build (fixed dates and identities).
MAIN = "be71828fce91c9eb95672de1b9a1cc32c0185051"
RELEASES = {"1.0.0": "4643692f516db26bebbf300b14ac9b23e8401bde", "1.1.0": "86580e939c454b6d01dbaf00221b2188c2430ca6",
            "2.0.0": "12746b212a7848ddfa5219be506176c27053130f"}

check(git("rev-parse", "refs/heads/main") == MAIN, "main was changed")
for version, commit in RELEASES.items():
    tag = f"refs/tags/v{version}"
    check(git("for-each-ref", "--format=%(objecttype)", tag) == "tag", f"v{version} is missing or not annotated")
    check(git("rev-parse", f"{tag}^{{commit}}") == commit, f"v{version} is not on the commit Release {version}")
    message = git("for-each-ref", "--format=%(contents)", tag).strip()
    check(message == f"Version {version}", f"v{version} has the message {message!r}")
check(git("tag", "--list", "tmp-backup") == "", "the tag tmp-backup still exists")
print("ok")
