#!/usr/bin/env bash
# Oracle: count 5xx per minute, take the top one, then the top path inside it.
set -euo pipefail
fivexx=$(grep -E ' status=5[0-9]{2} ' /app/app.log)
read -r count minute < <(cut -c1-16 <<<"$fivexx" | sort | uniq -c | sort -k1,1nr | head -n 1)
path=$(grep "^$minute" <<<"$fivexx" | grep -o 'path=[^ ]*' | sort | uniq -c | sort -k1,1nr | head -n 1 | awk '{ sub("path=", "", $2); print $2 }')
echo "$minute $count $path" > /app/spike.txt
