#!/usr/bin/env bash
# Oracle: a non-interactive autosquash rebase onto the fork point.
set -euo pipefail
cd /app/repo
git checkout -q feature
GIT_SEQUENCE_EDITOR=: git rebase -q -i --autosquash "$(git merge-base main feature)"
