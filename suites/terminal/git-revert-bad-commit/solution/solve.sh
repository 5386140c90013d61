#!/usr/bin/env bash
# Oracle: git revert adds the inverse commit; later changes touch other lines, so no conflict.
set -euo pipefail
cd /app/repo
sha=$(git log --format='%H %s' main | awk '{ h = $1; sub(/^[^ ]+ /, "") } $0 == "Move the service to port 9000" { print h }')
git revert --no-edit "$sha"
