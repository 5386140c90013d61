#!/usr/bin/env bash
# Oracle: python3 lower-cases non-ASCII letters correctly, LC_ALL=C sort gives byte order.
set -euo pipefail
python3 -c 'import sys; [print(w.strip().lower()) for w in open("/app/words.txt", encoding="utf-8") if w.strip()]' \
  | LC_ALL=C sort -u > /app/unique.txt
