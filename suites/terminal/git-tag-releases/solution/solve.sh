#!/usr/bin/env bash
# Oracle: find each release commit by its exact subject, tag it, drop the stray tag.
set -euo pipefail
cd /app/repo
for v in 1.0.0 1.1.0 2.0.0; do
  sha=$(git log main --format='%H %s' | awk -v s="Release $v" '{ h = $1; sub(/^[^ ]+ /, "") } $0 == s { print h }')
  git tag -a "v$v" -m "Version $v" "$sha"
done
git tag -d tmp-backup
