#!/usr/bin/env bash
# Oracle: the classic pipeline; sort -s keeps the IP order of the first sort within equal counts.
set -euo pipefail
awk '{ print $1 }' /app/access.log | sort | uniq -c | awk '{ print $1, $2 }' | sort -s -k1,1nr | head -n 5 > /app/top_ips.txt
