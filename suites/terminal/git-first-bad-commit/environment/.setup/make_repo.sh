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
cat > calc.py <<'PY'
def add(a, b):
    return a + b


def mul(a, b):
    return a * b
PY
cat > run_tests.sh <<'SH'
#!/usr/bin/env bash
# exits 0 when calc.py behaves
python3 -B -c 'import calc; assert calc.add(2, 3) == 5; assert calc.mul(3, 4) == 12; assert calc.mul(5, -2) == -10'
SH
chmod +x run_tests.sh
git add -A; commit "Add calculator with tests"
for i in $(seq 1 30); do
  echo "note $i" >> NOTES.md
  if [ $i = 17 ]; then
    # the regression: a loop that is wrong for negative factors
    python3 - <<'PY'
import re
src = open("calc.py").read()
src = src.replace("    return a * b\n", "    total = 0\n    for _ in range(b):\n        total += a\n    return total\n")
open("calc.py", "w").write(src)
PY
    git add -A; commit "Implement mul without the * operator"
  elif [ $i = 23 ]; then
    printf '\n\ndef sub(a, b):\n    return a - b\n' >> calc.py
    git add -A; commit "Add sub"
  else
    git add -A; commit "Update notes ($i)"
  fi
done
