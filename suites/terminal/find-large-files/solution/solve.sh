#!/usr/bin/env bash
# Oracle: find prunes .cache directories; -type f skips symlinks; -size +4096c means > 4096 bytes.
set -euo pipefail
cd /app/tree
find . -name .cache -type d -prune -o -type f -size +4096c -print | sed 's|^\./||' | LC_ALL=C sort > /app/large.txt
