#!/usr/bin/env bash
# Oracle: sed strips CR and trailing blanks; awk drops trailing blank lines and ends with one newline.
set -euo pipefail
find /app/docs -path /app/docs/raw -prune -o -type f -name '*.txt' -print0 | while IFS= read -r -d '' f; do
  sed -e 's/\r$//' -e 's/[ \t]*$//' "$f" | awk '{ lines[NR] = $0 } END { n = NR; while (n > 0 && lines[n] == "") n--; for (i = 1; i <= n; i++) print lines[i] }' > "$f.tmp"
  mv "$f.tmp" "$f"
done
