#!/usr/bin/env bash
# Oracle: one awk pass tracks failures and post-failure logins per IP; jq assembles the JSON.
set -euo pipefail
awk '
  /Failed password/ { ip = $(NF - 3); fail[ip]++; seen[ip] = 1 }
  /Accepted /       { ip = $(NF - 3); if (seen[ip]) ok[ip] = 1 }
  END { for (ip in fail) if (fail[ip] >= 10) print ip, fail[ip], (ok[ip] ? 1 : 0) }' /app/auth.log \
  | jq -R -s 'split("\n") | map(select(length > 0) | split(" ")) |
      {offenders: (sort_by(-(.[1] | tonumber), .[0]) | map({ip: .[0], failures: (.[1] | tonumber)})),
       compromised: (map(select(.[2] == "1") | .[0]) | sort)}' > /app/bruteforce.json
