#!/usr/bin/env bash
# Oracle: zcat -f reads plain and compressed files alike.
set -euo pipefail
zcat -f /app/logs/app.log* | awk '$3 == "ERROR" { n[$1]++ } END { for (d in n) print d, n[d] }' | sort > /app/errors_per_day.txt
