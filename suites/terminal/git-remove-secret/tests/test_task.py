"""Verifier of git-remove-secret: no ref reaches the secret, every commit keeps its message and other files."""

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


# (subject, tree) of main, newest first, after the purge: the trees follow from the files alone.
WANT = [
    ("App step 8", "b6cb186d54bbd3e67f8a116dc4c0c84c99ffe268"),
    ("App step 7", "c1e2e9183e1466a71b049ab166f718d79f97f32f"),
    ("App step 6", "fe3f692201f02952fc295c8d2b7dfc595702edd6"),
    ("Rotate keys", "94cd6991397086269b3f01c0d8c6d38812ca377f"),
    ("App step 5", "503b7fc906dc983aebd86d541bf66632c533ef81"),
    ("App step 4", "ea5d1bb8e4c1c9cb89de6a3a6c6e464eae0d61be"),
    ("App step 3", "db0b4a1ab3f3d993fb9a692c244b7376a08781c6"),
    ("Configure AWS and debug logging", "9a4a0258f3cb9bed4b017dd5828125094a044d88"),
    ("App step 2", "64d3fcb25eb189d4349a4800747b49ca979b974c"),
    ("App step 1", "4e939a5f8a979d1b49ddfd503301be4ec4c3dfd4"),
    ("Initial application", "a600952031a9ca84608bf38cbcbc74e75741c293"),
]

lines = git("log", "--format=%T %s", "refs/heads/main").splitlines()
check([(line[41:], line[:40]) for line in lines] == WANT,
      "main's commits (messages, order, files) are not the original ones without config/secrets.env")
tagged = git("rev-parse", "refs/tags/v1.0^{commit}")
check(git("log", "-1", "--format=%T", tagged) == WANT[1][1], "v1.0 does not point to the rewritten App step 7")
check(git("merge-base", "--is-ancestor", tagged, "refs/heads/main") == "", "v1.0 is not on main")
for commit in git("rev-list", "--all").split():
    check("config/secrets.env" not in git("ls-tree", "-r", "--name-only", commit).split(),
          f"commit {commit} (reachable from a ref) still contains config/secrets.env")
for line in git("rev-list", "--all", "--objects").splitlines():
    sha = line.split()[0]
    if git("cat-file", "-t", sha) == "blob":
        check("AKIAQX7TASKSUITE" not in git("cat-file", "-p", sha), f"a reachable blob ({sha}) holds the key")
print("ok")
