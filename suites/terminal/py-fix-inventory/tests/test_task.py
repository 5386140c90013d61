"""Verifier of py-fix-inventory: the hidden unit tests pass against the agent's package."""

from __future__ import annotations

import subprocess
import sys

# -I: no PYTHON* variables, no user site, no script folder trickery; -B: no bytecode in /app.
run = subprocess.run([sys.executable, "-I", "-B", "/tests/hidden_tests.py", "-v"], capture_output=True, text=True,
                     timeout=60, cwd="/tmp")
if run.returncode != 0 or "Ran 9 tests" not in run.stderr or not run.stderr.rstrip().endswith("OK"):
    sys.exit(f"FAIL: hidden tests failed:\n{run.stderr[-3000:]}")
print("ok")
