#!/usr/bin/env bash
# Verifier entry point (written by suites/terminal/_make.py, the same for every task): test_task.py
# (python3 stdlib) decides; the reward is 1 only when it exits 0, and is written last so nothing
# the checks run can leave another value behind.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.txt /logs/verifier/reward.json
# -I: no PYTHON* variables, no user site-packages (the agent may have planted a usercustomize.py
# there) and no script folder on sys.path; -B: no bytecode written.
if python3 -I -B /tests/test_task.py; then reward=1; else reward=0; fi
rm -f /logs/verifier/reward.json
echo "$reward" > /logs/verifier/reward.txt
