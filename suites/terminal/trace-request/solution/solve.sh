#!/usr/bin/env bash
# Oracle: find the id on the deadlock line, then merge that request's lines from every log.
set -euo pipefail
cd /app/logs
rid=$(grep -h 'ERROR: deadlock detected' db.log | sed -E 's/.*\[req=([^]]+)\].*/\1/' | head -n 1)
for f in gateway auth db; do
  grep -F "[req=$rid] " "$f.log" | sed -E "s/^([^ ]+) \[req=[^]]+\] /\1 $f /"
done | sort > /app/timeline.txt
