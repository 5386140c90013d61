#!/usr/bin/env bash
# Oracle: sum revenue in integer cents with awk (no float drift), then sort.
set -euo pipefail
mkdir -p /app/out
{
  echo "region,revenue"
  awk -F, 'NR > 1 { split($5, p, "."); cents[$2] += $4 * (p[1] * 100 + p[2]) }
           END { for (r in cents) printf "%s,%d.%02d\n", r, int(cents[r] / 100), cents[r] % 100 }' /app/sales.csv \
    | sort -t, -k2,2gr -k1,1
} > /app/out/region_totals.csv
