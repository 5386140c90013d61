#!/usr/bin/env bash
# Oracle: grep -n finds the comments, sed reshapes them into TSV, sort orders path then line.
set -euo pipefail
cd /app/src
find . -type f \( -name '*.py' -o -name '*.sh' -o -name '*.c' \) -printf '%P\n' | while IFS= read -r f; do
  case $f in *.c) mark='//' ;; *) mark='#' ;; esac
  grep -n "$mark TODO(" "$f" | sed -E "s|^([0-9]+):.*$mark TODO\\(([^)]+)\\): (.*)\$|$f\t\1\t\2\t\3|; s/[[:space:]]+\$//" || true
done | LC_ALL=C sort -t$'\t' -k1,1 -k2,2n > /app/todos.tsv
