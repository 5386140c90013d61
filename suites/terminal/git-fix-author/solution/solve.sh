#!/usr/bin/env bash
# Oracle: filter-branch keeps dates unless told otherwise; its backup refs are deleted afterwards.
set -euo pipefail
cd /app/repo
FILTER_BRANCH_SQUELCH_WARNING=1 git filter-branch -f --env-filter '
  if [ "$GIT_AUTHOR_EMAIL" = "jo@old-laptop.local" ]; then
    export GIT_AUTHOR_NAME="Jo Developer" GIT_AUTHOR_EMAIL="jo@example.com"
  fi
  if [ "$GIT_COMMITTER_EMAIL" = "jo@old-laptop.local" ]; then
    export GIT_COMMITTER_NAME="Jo Developer" GIT_COMMITTER_EMAIL="jo@example.com"
  fi' -- main > /dev/null
git for-each-ref --format='%(refname)' refs/original/ | xargs -r -n 1 git update-ref -d
