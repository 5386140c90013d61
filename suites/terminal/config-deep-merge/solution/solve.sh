#!/usr/bin/env bash
# Oracle: a recursive jq function (jq's own * operator would keep nulls instead of deleting keys).
set -euo pipefail
cd /app/config
jq -n --slurpfile base base.json --slurpfile over overrides/prod.json '
  def merge($a; $b):
    reduce ($b | keys_unsorted[]) as $k ($a;
      if $b[$k] == null then del(.[$k])
      elif (.[$k] | type) == "object" and ($b[$k] | type) == "object" then .[$k] = merge(.[$k]; $b[$k])
      else .[$k] = $b[$k] end);
  merge($base[0]; $over[0])' > effective.json
