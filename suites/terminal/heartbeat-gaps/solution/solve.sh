#!/usr/bin/env bash
# Oracle: epoch seconds from date -f; awk compares consecutive beats per host.
set -euo pipefail
{
  echo "host,start,end,seconds"
  # one date process converts every timestamp (date -f reads them line by line)
  paste -d' ' <(cut -d' ' -f1 /app/heartbeats.log | date -u -f - +%s) <(cut -d' ' -f1,2 /app/heartbeats.log) | awk '{ if (($3 in last) && $1 - last[$3] > 30) print $3 "," ts[$3] "," $2 "," $1 - last[$3]; last[$3] = $1; ts[$3] = $2 }' \
    | sort -t, -k1,1 -k2,2
} > /app/gaps.csv
