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
printf 'size=64\nttl=30\n' > cache.conf; echo "# cache service" > README.md
git add -A; commit "Initial cache service"
echo "retries=3" >> cache.conf; git add -A; commit "Add retries"
git checkout -q -b experiment
sed -i 's/size=64/size=256/' cache.conf; git add -A; commit "experiment: bigger cache"
echo "eviction=lfu" >> cache.conf; git add -A; commit "experiment: try LFU eviction"
sed -i 's/ttl=30/ttl=120/' cache.conf; git add -A; commit "experiment: tune cache size"
git checkout -q main
echo "Run with ./cache --config cache.conf" >> README.md; git add -A; commit "Document usage"
# the branch is deleted; only the reflog remembers its commits
git branch -q -D experiment
