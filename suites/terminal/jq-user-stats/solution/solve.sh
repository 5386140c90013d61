#!/usr/bin/env bash
# Oracle: slurp the stream with jq and group by user (the stream is in time order already).
set -euo pipefail
jq -s 'group_by(.user) | map({key: .[0].user, value: {events: length,
       clicks: (map(select(.type == "click")) | length), first_seen: .[0].ts, last_seen: .[-1].ts}})
       | from_entries' /app/events.jsonl > /app/user_stats.json
