"""Verifier of crontab-schedule: evaluates each cron line (lists, ranges, steps, names, macros,
the day-of-month/day-of-week OR rule) minute by minute over eight weeks and compares the times
it fires with the required schedule, so any equivalent expression passes."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable
from pathlib import Path

NAMES = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10,
         "nov": 11, "dec": 12, "sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
          "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
RANGES = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)]


def field(text: str, low: int, high: int) -> set[int]:
    out: set[int] = set()
    for part in text.lower().split(","):
        base, _, step = part.partition("/")
        if base == "*":
            start, end = low, high
        else:
            a, _, b = base.partition("-")
            start = NAMES[a] if a in NAMES else int(a)
            end = (NAMES[b] if b in NAMES else int(b)) if b else (high if step else start)
        if not (low <= start <= high and low <= end <= high and start <= end):
            raise ValueError(f"{part!r} is out of range {low}-{high}")
        out |= set(range(start, end + 1, int(step) if step else 1))
    return out


def schedule(fields: list[str]) -> Callable[[dt.datetime], bool]:
    minute, hour, dom, month, dow = (field(f, lo, hi) for f, (lo, hi) in zip(fields, RANGES, strict=True))
    dow = {d % 7 for d in dow}
    dom_any, dow_any = fields[2] == "*", fields[4] == "*"

    def fires(t: dt.datetime) -> bool:
        day_ok_dom, day_ok_dow = t.day in dom, (t.isoweekday() % 7) in dow
        day = (day_ok_dom and day_ok_dow) if (dom_any or dow_any) else (day_ok_dom or day_ok_dow)
        return t.minute in minute and t.hour in hour and t.month in month and day

    return fires


WANT: dict[str, Callable[[dt.datetime], bool]] = {
    "/app/jobs/backup.sh": lambda t: (t.hour, t.minute) == (2, 30),
    "/app/jobs/report.sh": lambda t: (t.hour, t.minute) == (8, 0) and t.isoweekday() <= 5,
    "/app/jobs/poll.sh": lambda t: 9 <= t.hour <= 17 and t.minute % 15 == 0 and t.isoweekday() <= 5,
    "/app/jobs/cleanup.sh": lambda t: (t.day, t.hour, t.minute) == (1, 0, 0),
    "/app/jobs/rotate.sh": lambda t: (t.hour, t.minute) == (23, 59) and t.isoweekday() == 7,
}
path = Path("/app/crontab")
if not path.is_file():
    sys.exit(f"FAIL: {path} is missing")
variables: dict[str, str] = {}
jobs: dict[str, list[Callable[[dt.datetime], bool]]] = {}
for number, raw in enumerate(path.read_text().splitlines(), 1):
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    first = line.split()[0]
    if "=" in first and not first[0].isdigit() and first[0] not in "*@":
        name, _, value = line.partition("=")
        variables[name.strip()] = value.strip().strip("'\"")
        continue
    try:
        if first in MACROS:
            fields, command = MACROS[first].split(), line[len(first):].strip()
        else:
            parts = line.split(None, 5)
            fields, command = parts[:5], parts[5] if len(parts) == 6 else ""
        jobs.setdefault(command, []).append(schedule(fields))
    except (ValueError, KeyError, IndexError) as exc:
        sys.exit(f"FAIL: line {number} is not a valid cron line ({exc}): {raw!r}")
if variables.get("MAILTO") != "ops@example.com":
    sys.exit("FAIL: MAILTO is not set to ops@example.com")
if sorted(jobs) != sorted(WANT) or any(len(v) != 1 for v in jobs.values()):
    sys.exit(f"FAIL: the commands are {sorted(jobs)!r}; each of {sorted(WANT)!r} must appear on exactly one line")
start = dt.datetime(2024, 1, 1)  # eight weeks: a 31-day month, February of a leap year, every weekday
for command, wanted in WANT.items():
    fires = jobs[command][0]
    for n in range(8 * 7 * 24 * 60):
        t = start + dt.timedelta(minutes=n)
        if fires(t) != wanted(t):
            sys.exit(f"FAIL: {command} {'runs' if fires(t) else 'does not run'} at {t:%a %Y-%m-%d %H:%M}")
print("ok")
