#!/usr/bin/env bash
# Oracle: extract (endpoint, ms), sort numerically per endpoint, then pick ranks in awk.
set -euo pipefail
{
  echo "endpoint,count,p50,p95,p99"
  sed -E 's/^.*"[A-Z]+ ([^ ?]+)[^"]*".* rt=([0-9]+)ms$/\1 \2/' /app/access.log | LC_ALL=C sort -k1,1 -k2,2n | awk '
    function r(p,   k) { k = int(p * n / 100); if (k < p * n / 100) k++; if (k < 1) k = 1; return v[k] }
    function flush() { if (n) printf "%s,%d,%d,%d,%d\n", ep, n, r(50), r(95), r(99); n = 0 }
    $1 != ep { flush(); ep = $1 }
    { v[++n] = $2 }
    END { flush() }'
} > /app/latency.csv
