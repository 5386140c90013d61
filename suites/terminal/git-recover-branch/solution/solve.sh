#!/usr/bin/env bash
# Oracle: HEAD's reflog records the checkout that left experiment; its "from" commit is the old tip.
set -euo pipefail
cd /app/repo
# Newest first: the entry after "checkout: moving from experiment to ..." is where HEAD stood on
# experiment just before leaving it, i.e. the branch's last commit.
tip=$(git reflog --format='%H %gs' HEAD | awk 'found { print $1; exit } /checkout: moving from experiment to / { found = 1 }')
git branch experiment "$tip"
