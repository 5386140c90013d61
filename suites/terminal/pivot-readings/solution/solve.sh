#!/usr/bin/env bash
# Oracle: awk keeps a (timestamp, sensor) table, sort orders the keys.
set -euo pipefail
sensors=$(tail -n +2 /app/readings.csv | cut -d, -f2 | sort -u | paste -sd, -)
{
  echo "timestamp,$sensors"
  tail -n +2 /app/readings.csv | sort -t, -k1,1 | awk -F, -v sensors="$sensors" '
    BEGIN { n = split(sensors, s, ",") }
    function flush() { if (ts == "") return; line = ts; for (i = 1; i <= n; i++) line = line "," v[s[i]]; print line; delete v }
    $1 != ts { flush(); ts = $1 }
    { v[$2] = $3 }
    END { flush() }'
} > /app/wide.csv
