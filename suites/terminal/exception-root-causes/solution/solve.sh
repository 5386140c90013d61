#!/usr/bin/env bash
# Oracle: awk walks the traces, remembering the latest exception class of the current one.
set -euo pipefail
awk '
  function flush() { if (cause != "") print cause; cause = "" }
  / ERROR \[/ { flush(); in_trace = 1; first = 1; next }
  in_trace && first { split($0, p, ":"); cause = p[1]; first = 0; next }
  in_trace && /^Caused by: / { sub(/^Caused by: /, ""); split($0, p, ":"); cause = p[1]; next }
  in_trace && /^\t/ { next }
  { flush(); in_trace = 0 }
  END { flush() }' /app/app.log | sort | uniq -c \
  | jq -R -s 'split("\n") | map(select(length > 0) | capture("^ *(?<n>[0-9]+) (?<c>.+)$") | {key: .c, value: (.n | tonumber)}) | from_entries' \
  > /app/root_causes.json
