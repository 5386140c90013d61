#!/usr/bin/env bash
# Oracle: python3's re.sub with a function never interprets the value (sed would eat & and \).
set -euo pipefail
python3 - <<'PY'
import re
values = {}
for line in open("/app/vars.env", encoding="utf-8").read().splitlines():
    if line and not line.startswith("#") and "=" in line:
        key, _, value = line.partition("=")
        values[key] = value
text = open("/app/template.txt", encoding="utf-8").read()
out = re.sub(r"\{\{([A-Z_]+)\}\}", lambda m: values.get(m[1], m[0]), text)
open("/app/rendered.txt", "w", encoding="utf-8").write(out)
PY
