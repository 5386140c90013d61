#!/usr/bin/env bash
# Builds /app/repo at set-up. Fixed identities and dates make every commit hash the same on every
# build, which the verifier relies on; no ambient git configuration is read.
set -euo pipefail
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Robin Keeper" GIT_AUTHOR_EMAIL="robin@example.com"
export GIT_COMMITTER_NAME="Robin Keeper" GIT_COMMITTER_EMAIL="robin@example.com"
T=1704067200
commit() { T=$((T + 3600)); GIT_AUTHOR_DATE="$T +0000" GIT_COMMITTER_DATE="$T +0000" git commit -q -m "$1"; }
git init -q -b main /app/repo
cd /app/repo
# the identity the agent commits with
git config user.name "Task Agent"
git config user.email "agent@example.com"
as_jo() { GIT_AUTHOR_NAME="Jo Dev" GIT_AUTHOR_EMAIL="jo@old-laptop.local" GIT_COMMITTER_NAME="Jo Dev" GIT_COMMITTER_EMAIL="jo@old-laptop.local" "$@"; }
for i in $(seq 1 9); do
  echo "line $i" >> log.txt
  git add -A
  case $i in
    4|6|9) as_jo commit "Jo's change $i" ;;
    *) commit "Robin's change $i" ;;
  esac
done
