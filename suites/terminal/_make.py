"""Writes the generated files of the terminal suite: every task's task.toml and tests/test.sh, the
data files under environment/ and the expected answers under tests/ (python3 stdlib only).

Everything comes from fixed seeds, so a run reproduces the committed files byte for byte:
``python3 suites/terminal/_make.py`` rewrites them, ``--check`` only reports the files that differ
(the suite's test runs it). Hand-written files (instruction.md, Dockerfile, solve.sh, test_task.py,
sources of the build tasks, the git tasks' set-up scripts) are never touched here.

The expected answers are computed here in Python, independently of the oracles (which use the
shell tools an agent would), and the verifiers read them from /tests, which the agent never sees.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from _gen_data import DATA
from _gen_logs import LOGS
from _gen_text import TEXT

__all__ = ["TASKS", "Meta", "expected_files", "main"]

SUITE = Path(__file__).resolve().parent

#: id -> (category, difficulty, tags, agent timeout s, verifier timeout s). Categories: text, git,
#: build, config, data, logs.
Meta = tuple[str, str, tuple[str, ...], int, int]
TASKS: dict[str, Meta] = {
    # files and text processing
    "unique-words": ("text", "easy", ("sort", "uniq"), 300, 60),
    "find-large-files": ("text", "easy", ("find", "filesystem"), 300, 60),
    "normalize-line-endings": ("text", "easy", ("sed", "whitespace"), 300, 60),
    "organize-photos": ("text", "medium", ("mv", "filenames"), 600, 60),
    "word-frequency": ("text", "medium", ("tr", "sort", "uniq"), 600, 60),
    "render-template": ("text", "medium", ("templating", "escaping"), 600, 60),
    "collect-todos": ("text", "medium", ("grep", "tsv"), 600, 60),
    "split-chapters": ("text", "hard", ("awk", "roman-numerals"), 900, 60),
    # git history surgery
    "git-tag-releases": ("git", "easy", ("tag",), 300, 60),
    "git-recover-branch": ("git", "medium", ("reflog",), 600, 60),
    "git-first-bad-commit": ("git", "medium", ("bisect",), 600, 60),
    "git-revert-bad-commit": ("git", "medium", ("revert",), 600, 60),
    "git-autosquash": ("git", "medium", ("rebase", "fixup"), 600, 60),
    "git-fix-author": ("git", "medium", ("filter-branch", "identity"), 600, 60),
    "git-split-commit": ("git", "hard", ("rebase", "reset"), 900, 60),
    "git-remove-secret": ("git", "hard", ("filter-branch", "secrets"), 900, 60),
    # building and fixing a small C or Python program
    "c-fix-makefile": ("build", "easy", ("c", "make"), 300, 120),
    "c-rle-off-by-one": ("build", "medium", ("c", "debugging"), 600, 120),
    "c-parse-duration": ("build", "medium", ("c", "parsing"), 600, 120),
    "c-write-makefile": ("build", "hard", ("c", "make", "dependencies"), 900, 120),
    "py-fix-inventory": ("build", "medium", ("python", "unittest"), 600, 120),
    "py-semver-sort": ("build", "medium", ("python", "semver"), 600, 120),
    "py-import-cycle": ("build", "hard", ("python", "imports"), 900, 120),
    # service configuration
    "ini-app-config": ("config", "easy", ("ini",), 300, 60),
    "logrotate-policy": ("config", "easy", ("logrotate",), 300, 60),
    "systemd-unit": ("config", "medium", ("systemd",), 600, 60),
    "crontab-schedule": ("config", "medium", ("cron",), 600, 60),
    "config-deep-merge": ("config", "medium", ("json", "jq"), 600, 60),
    "ssh-config-hosts": ("config", "medium", ("ssh", "csv"), 600, 60),
    "supervisor-workers": ("config", "medium", ("supervisord", "ini"), 600, 60),
    # data wrangling with standard tools
    "csv-sales-summary": ("data", "easy", ("csv", "awk"), 300, 60),
    "json-to-csv": ("data", "medium", ("json", "jq", "csv"), 600, 60),
    "sqlite-top-customers": ("data", "medium", ("sqlite3", "sql"), 600, 60),
    "jq-user-stats": ("data", "medium", ("jq", "jsonl"), 600, 60),
    "sqlite-import-csv": ("data", "medium", ("sqlite3", "csv"), 600, 60),
    "pivot-readings": ("data", "medium", ("csv", "pivot"), 600, 60),
    "csv-clean-join": ("data", "hard", ("csv", "cleaning", "join"), 900, 60),
    # log forensics
    "top-client-ips": ("logs", "easy", ("access-log",), 300, 60),
    "rotated-error-count": ("logs", "easy", ("gzip", "zgrep"), 300, 60),
    "ssh-bruteforce": ("logs", "medium", ("auth-log", "security"), 600, 60),
    "error-spike-minute": ("logs", "medium", ("5xx",), 600, 60),
    "trace-request": ("logs", "medium", ("correlation",), 600, 60),
    "exception-root-causes": ("logs", "medium", ("stack-traces",), 600, 60),
    "heartbeat-gaps": ("logs", "medium", ("time",), 600, 60),
    "latency-percentiles": ("logs", "hard", ("percentiles", "access-log"), 900, 60),
}

CATEGORY_NAMES = {"text": "files and text processing", "git": "git history surgery",
                  "build": "building and fixing a C or Python program", "config": "service configuration",
                  "data": "data wrangling", "logs": "log forensics"}

TEST_SH = """#!/usr/bin/env bash
# Verifier entry point (written by suites/terminal/_make.py, the same for every task): test_task.py
# (python3 stdlib) decides; the reward is 1 only when it exits 0, and is written last so nothing
# the checks run can leave another value behind.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.txt /logs/verifier/reward.json
# -I: no PYTHON* variables, no user site-packages (the agent may have planted a usercustomize.py
# there) and no script folder on sys.path; -B: no bytecode written.
if python3 -I -B /tests/test_task.py; then reward=1; else reward=0; fi
rm -f /logs/verifier/reward.json
echo "$reward" > /logs/verifier/reward.txt
"""


def task_toml(task_id: str, meta: Meta) -> str:
    category, difficulty, tags, agent_s, verifier_s = meta
    tag_list = ", ".join(json.dumps(t) for t in (category, *tags))
    return (f'version = "1.0"\n\n[metadata]\nauthor_name = "OpenEnv"\ndifficulty = "{difficulty}"\n'
            f'category = "{CATEGORY_NAMES[category]}"\ntags = [{tag_list}]\n\n'
            f"[verifier]\ntimeout_sec = {verifier_s}\n\n[agent]\ntimeout_sec = {agent_s}\n\n"
            "[environment]\nbuild_timeout_sec = 120\ncpus = 1\nmemory_mb = 1024\nstorage_mb = 1024\n"
            "allow_internet = false\n")


def expected_files() -> dict[Path, str]:
    """Every generated file (path inside the suite -> text)."""
    generators: dict[str, Callable[[], dict[str, str]]] = {**DATA, **LOGS, **TEXT}
    unknown = sorted(set(generators) - set(TASKS))
    if unknown:
        raise SystemExit(f"generators for tasks missing from TASKS: {unknown}")
    files: dict[Path, str] = {}
    for task_id, meta in TASKS.items():
        files[Path(task_id) / "task.toml"] = task_toml(task_id, meta)
        files[Path(task_id) / "tests" / "test.sh"] = TEST_SH
        if task_id in generators:
            for rel, text in generators[task_id]().items():
                files[Path(task_id) / rel] = text
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the generated files of the terminal suite.")
    parser.add_argument("--check", action="store_true", help="only list files that differ; exit 1 if any")
    args = parser.parse_args(argv)
    stale: list[str] = []
    for rel, text in expected_files().items():
        path = SUITE / rel
        if path.is_file() and path.read_bytes() == text.encode():  # bytes: CRLF files stay CRLF
            continue
        if args.check:
            stale.append(str(rel))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
        if rel.name.endswith(".sh"):
            path.chmod(0o755)
    if stale:
        print("stale generated files (run python3 suites/terminal/_make.py):\n  " + "\n  ".join(stale),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
