"""Verifier of systemd-unit: parses the unit as systemd does (sections, repeated and list-valued
directives, quoting in Environment=) and checks what each directive means."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

path = Path("/app/deploy/webapp.service")
if not path.is_file():
    sys.exit(f"FAIL: {path} is missing")
unit: dict[str, dict[str, list[str]]] = {}
section = None
text = re.sub(r"\\\n", " ", path.read_text())  # continuation lines
for number, raw in enumerate(text.splitlines(), 1):
    line = raw.strip()
    if not line or line[0] in "#;":
        continue
    if line.startswith("[") and line.endswith("]"):
        section = unit.setdefault(line[1:-1], {})
        continue
    key, eq, value = line.partition("=")
    if section is None or not eq:
        sys.exit(f"FAIL: line {number} is not 'Key=value' inside a section: {raw!r}")
    section.setdefault(key.strip(), []).append(value.strip())


def values(sec: str, key: str) -> list[str]:
    return unit.get(sec, {}).get(key, [])


def single(sec: str, key: str) -> str | None:
    found = [v for v in values(sec, key) if v]  # systemd: the last assignment wins
    return found[-1] if found else None


def words(sec: str, key: str) -> set[str]:
    return {w for v in values(sec, key) for w in v.split()}


def check(ok: bool, message: str) -> None:
    if not ok:
        sys.exit(f"FAIL: {message}")


YES = {"1", "yes", "true", "on"}
check(single("Unit", "Description") == "Webapp API server", "[Unit] Description")
check("network-online.target" in words("Unit", "Wants"), "[Unit] Wants= must include network-online.target")
check("network-online.target" in words("Unit", "After"), "[Unit] After= must include network-online.target")
for key, want in [("Type", "simple"), ("User", "webapp"), ("Group", "webapp"), ("WorkingDirectory", "/srv/webapp"),
                  ("Restart", "on-failure"), ("ProtectSystem", "strict")]:
    check(single("Service", key) == want, f"[Service] {key}= must be {want}")
check(single("Service", "RestartSec") in {"5", "5s"}, "[Service] RestartSec= must be 5 seconds")
check((single("Service", "NoNewPrivileges") or "").lower() in YES, "[Service] NoNewPrivileges= must be yes")
check([f.lstrip("-") for f in values("Service", "EnvironmentFile")] == ["/etc/webapp/env"],
      "[Service] EnvironmentFile= must be /etc/webapp/env")
check(words("Service", "ReadWritePaths") == {"/var/lib/webapp"},
      "[Service] ReadWritePaths= must be /var/lib/webapp only")
env: dict[str, str] = {}
for assignment in values("Service", "Environment"):
    for item in shlex.split(assignment):
        name, _, value = item.partition("=")
        env[name] = value
check(env.get("PORT") == "8080" and env.get("LOG_LEVEL") == "info", f"[Service] Environment= gives {env!r}")
starts = values("Service", "ExecStart")
check(len(starts) == 1 and shlex.split(starts[0]) in (["/srv/webapp/bin/server", "--port", "${PORT}"],
                                                     ["/srv/webapp/bin/server", "--port", "$PORT"]),
      f"[Service] ExecStart= is {starts!r}")
check("multi-user.target" in words("Install", "WantedBy"), "[Install] WantedBy= must include multi-user.target")
print("ok")
