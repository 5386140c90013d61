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
mkdir -p src docs
printf '#include <string.h>\n\nvoid append(char *dst, const char *src) {\n    strcat(dst, src);\n}\n' > src/buffer.c
printf '# Usage\n\nCall append(dst, src).\n' > docs/usage.md
git add -A; commit "Add buffer helpers"
printf 'CFLAGS = -O2\n' > Makefile; git add -A; commit "Add Makefile"
printf '#include <string.h>\n\nvoid append(char *dst, size_t size, const char *src) {\n    strncat(dst, src, size - strlen(dst) - 1);\n}\n' > src/buffer.c
printf '# Usage\n\nCall append(dst, sizeof dst, src); the result is cut to fit.\n' > docs/usage.md
git add -A; commit "Fix overflow and update docs"
