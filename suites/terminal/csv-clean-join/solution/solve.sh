#!/usr/bin/env bash
# Oracle: python3's csv module handles the quoted "52,000" fields; integer maths for the rounding.
set -euo pipefail
python3 - <<'PY'
import csv
from collections import defaultdict
names = {r["code"].strip().upper(): r["name"] for r in csv.DictReader(open("/app/departments.csv"))}
people = {}
for r in csv.DictReader(open("/app/employees.csv")):
    salary = int(r["salary"].strip().lstrip("$").replace(",", ""))
    people[r["id"].strip()] = (names.get(r["dept_code"].strip().upper(), "UNASSIGNED"), salary)
groups = defaultdict(list)
for dept, salary in people.values():
    groups[dept].append(salary)
with open("/app/report.csv", "w") as out:
    out.write("department,headcount,avg_salary\n")
    for dept in sorted(groups):
        s, n = sum(groups[dept]), len(groups[dept])
        out.write(f"{dept},{n},{(2 * s + n) // (2 * n)}\n")
PY
