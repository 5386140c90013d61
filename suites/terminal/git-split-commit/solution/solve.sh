#!/usr/bin/env bash
# Oracle: undo the commit but keep its changes, then commit them path by path.
set -euo pipefail
cd /app/repo
git reset -q HEAD~1
git add src/buffer.c && git commit -q -m "Fix buffer overflow in append"
git add docs/usage.md && git commit -q -m "Document the size limit"
