#!/usr/bin/env bash
# Oracle: jq's @csv quotes every string and doubles inner quotes, which RFC 4180 allows.
set -euo pipefail
{
  echo "id,full_name,email,city,country,tags,active"
  jq -r 'sort_by(.id)[] | [.id, (.name.first + " " + .name.last), .email, .address.city, .address.country,
         (.tags | join(";")), (if .active then "true" else "false" end)] | @csv' /app/users.json
} > /app/users.csv
