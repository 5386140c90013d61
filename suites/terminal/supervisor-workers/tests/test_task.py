"""Verifier of supervisor-workers: parses the file as INI (as supervisord does), checks the
existing sections are untouched and what the new options mean."""

from __future__ import annotations

import configparser
import shlex
import sys


def load(path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";", "#"))
    try:
        if not parser.read(path):
            sys.exit(f"FAIL: {path} is missing")
    except configparser.Error as exc:
        sys.exit(f"FAIL: {path} is not valid INI: {exc}")
    return parser


def check(ok: bool, message: str) -> None:
    if not ok:
        sys.exit(f"FAIL: {message}")


original, conf = load("/tests/original.conf"), load("/app/supervisord.conf")
for section in original.sections():
    check(conf.has_section(section) and dict(conf[section]) == dict(original[section]), f"[{section}] was changed")
check(set(conf.sections()) == set(original.sections()) | {"program:worker", "group:app"},
      f"sections are {conf.sections()}, expected the original ones plus [program:worker] and [group:app]")
worker = conf["program:worker"]
TRUE = {"true", "yes", "on", "1"}
check(shlex.split(worker.get("command", "")) == ["/srv/app/bin/worker", "--queue", "default"], "worker command")
check(worker.get("numprocs") == "3", "numprocs must be 3")
check(worker.get("process_name") == "%(program_name)s_%(process_num)02d", "process_name")
check(worker.get("directory") == "/srv/app" and worker.get("user") == "app", "directory / user")
check(worker.get("autostart", "true").lower() in TRUE, "autostart must be on")
check(worker.get("autorestart", "").lower() in TRUE, "autorestart must be true (always restart)")
check(worker.get("stopwaitsecs") == "30", "stopwaitsecs must be 30")
check(worker.get("stdout_logfile") == "/var/log/app/worker_%(process_num)02d.log", "stdout_logfile")
check(worker.get("redirect_stderr", "").lower() in TRUE, "redirect_stderr must be true")
env: dict[str, str] = {}
lexer = shlex.shlex(worker.get("environment", ""), posix=True)
lexer.whitespace, lexer.whitespace_split = ",", True
for item in lexer:
    key, _, value = item.strip().partition("=")
    env[key] = value
check(env == {"QUEUE_URL": "redis://127.0.0.1:6379/0", "LOG_LEVEL": "info"}, f"environment gives {env!r}")
programs = {p.strip() for p in conf["group:app"].get("programs", "").split(",")}
check(programs == {"web", "worker"}, f"group app has programs {programs!r}")
print("ok")
