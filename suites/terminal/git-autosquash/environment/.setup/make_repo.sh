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
printf 'demo project\n' > README; git add -A; commit "Initial commit"
git checkout -q -b feature
printf 'def parse(s):\n    return s.split()\n' > parser.py; git add -A; commit "Add parser"
printf 'def parse(s):\n    return s.split(",")\n' > parser.py; git add -A; commit "fixup! Add parser"
printf 'import parser\n\nprint(parser.parse("a,b"))\n' > cli.py; git add -A; commit "Add CLI"
printf 'import sys\nimport parser\n\nprint(parser.parse(sys.argv[1]))\n' > cli.py; git add -A; commit "fixup! Add CLI"
printf 'Usage: python3 cli.py "a,b"\n' > USAGE; git add -A; commit "Add usage notes"
printf 'def parse(s):\n    return [p.strip() for p in s.split(",")]\n' > parser.py; git add -A; commit "fixup! Add parser"
git checkout -q main
printf 'demo project (stable)\n' > README; git add -A; commit "Mark README stable"
git checkout -q feature
