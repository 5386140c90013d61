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
mkdir -p config src
printf 'APP_ENV=production\n' > config/app.env
printf 'print("hello")\n' > src/app.py
git add -A; commit "Initial application"
for i in 1 2; do echo "# step $i" >> src/app.py; git add -A; commit "App step $i"; done
printf 'AWS_ACCESS_KEY_ID=AKIAQX7TASKSUITE0001\nAWS_SECRET_ACCESS_KEY=sk-live-7f9d2c41e8b3\n' > config/secrets.env
echo "LOG_LEVEL=debug" >> config/app.env
git add -A; commit "Configure AWS and debug logging"
for i in 3 4 5; do echo "# step $i" >> src/app.py; git add -A; commit "App step $i"; done
printf 'AWS_ACCESS_KEY_ID=AKIAQX7TASKSUITE0002\nAWS_SECRET_ACCESS_KEY=sk-live-0b5e77aa19c2\n' > config/secrets.env
echo "# rotate keys" >> src/app.py
git add -A; commit "Rotate keys"
for i in 6 7; do echo "# step $i" >> src/app.py; git add -A; commit "App step $i"; done
git tag v1.0
echo "# step 8" >> src/app.py; git add -A; commit "App step 8"
