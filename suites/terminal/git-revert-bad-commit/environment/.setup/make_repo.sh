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
printf '[server]\nhost = 0.0.0.0\nport = 8080\nworkers = 2\n\n[log]\nlevel = info\n' > service.ini
printf 'Start the service; it listens on port 8080.\n\nSettings live in service.ini.\n\nLicense: MIT\n' > README
git add -A; commit "Add service configuration"
sed -i 's/workers = 2/workers = 4/' service.ini; git add -A; commit "Use four workers"
sed -i 's/port = 8080/port = 9000/' service.ini; sed -i 's/port 8080/port 9000/' README
git add -A; commit "Move the service to port 9000"
sed -i 's/level = info/level = warning/' service.ini; git add -A; commit "Log warnings only"
printf '\n[metrics]\nenabled = true\n' >> service.ini; git add -A; commit "Enable metrics"
echo "Metrics are on by default." >> README; git add -A; commit "Document metrics"
