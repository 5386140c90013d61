"""Verifier of logrotate-policy: parses the stanza the way logrotate reads it and checks each
directive (order and spacing are free)."""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path

NGINX_SHA = "8745cce76b5b8efdf523ad0e67d8ad45302d7035e4ec25a6f77b3662aeb2b412"
path = Path("/app/logrotate.d/webapp")
if not path.is_file():
    sys.exit(f"FAIL: {path} is missing")
if hashlib.sha256(Path("/app/logrotate.d/nginx").read_bytes()).hexdigest() != NGINX_SHA:
    sys.exit("FAIL: /app/logrotate.d/nginx was changed")
lines = [line.split("#", 1)[0].strip() for line in path.read_text().splitlines()]
lines = [line for line in lines if line]
if not lines or not lines[0].endswith("{") or lines[-1] != "}" or sum(line.endswith("{") for line in lines) != 1:
    sys.exit("FAIL: expected exactly one '<paths> { ... }' stanza")
paths = shlex.split(lines[0][:-1])
if paths != ["/var/log/webapp/*.log"]:
    sys.exit(f"FAIL: the stanza is for {paths!r}, not /var/log/webapp/*.log")
directives: list[list[str]] = []
scripts: dict[str, list[str]] = {}
body = iter(lines[1:-1])
for line in body:
    words = line.split()
    if words[0] in {"postrotate", "prerotate", "firstaction", "lastaction"}:
        script = []
        for inner in body:
            if inner == "endscript":
                break
            script.append(inner)
        else:
            sys.exit(f"FAIL: {words[0]} without endscript")
        scripts[words[0]] = script
    else:
        directives.append(words)
names = [d[0] for d in directives]
for want in (["daily"], ["rotate", "14"], ["compress"], ["delaycompress"], ["missingok"], ["notifempty"],
             ["create", "0640", "webapp", "adm"], ["sharedscripts"]):
    if want not in directives:
        sys.exit(f"FAIL: missing directive {' '.join(want)!r}")
for conflicting in ("weekly", "monthly", "yearly", "hourly", "nocompress", "nomissingok", "ifempty", "nocreate",
                    "nosharedscripts", "nodelaycompress"):
    if conflicting in names:
        sys.exit(f"FAIL: {conflicting!r} contradicts the policy")
if len(names) != len(set(names)):
    sys.exit("FAIL: a directive is repeated")
if scripts.get("postrotate") != ["systemctl reload webapp >/dev/null 2>&1 || true"]:
    sys.exit(f"FAIL: the postrotate script is {scripts.get('postrotate')!r}")
print("ok")
