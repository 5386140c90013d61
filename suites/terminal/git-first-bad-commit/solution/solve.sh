#!/usr/bin/env bash
# Oracle: git bisect run drives the test script between the root (good) and main (bad).
set -euo pipefail
cd /app/repo
git bisect start main "$(git rev-list --max-parents=0 main)"
git bisect run ./run_tests.sh > /tmp/bisect.log
git rev-parse refs/bisect/bad > /app/first_bad.txt
git bisect reset > /dev/null
