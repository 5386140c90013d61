"""End-state checks: each task's grader reads only the database after the episode.

``grade(task, db, ids, baseline, part)`` returns named components, each 1.0 or 0.0; the episode's
reward is 1.0 when every component is 1.0. ``part`` is 1 for the request and 2 once the user added
the follow-up (multi-turn templates): part 2 grades both parts. ``baseline`` is the snapshot of the
seeded tables taken before the agent acted, so "nothing else changed" is checked, not assumed.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from openenv_env_office.db import OfficeDB
from openenv_env_office.tasks import OfficeTask

__all__ = ["grade", "snapshot", "time_phrases", "date_phrases"]


def snapshot(db: OfficeDB) -> dict[str, list[dict[str, Any]]]:
    """The rows a grader compares against: every event, to-do and contact."""
    return {"events": db.events(), "todos": db.todos(include_done=True), "contacts": db.contacts()}


def time_phrases(hour: int, minute: int = 0) -> list[str]:
    """Ways a message may state a clock time: ``15:00``, ``3:00 pm``, ``3pm`` ..."""
    h12, half = (hour - 1) % 12 + 1, "pm" if hour >= 12 else "am"
    return [f"{hour:02d}:{minute:02d}", f"{hour}:{minute:02d}", f"{h12}:{minute:02d} {half}",
            f"{h12}:{minute:02d}{half}"] + ([f"{h12} {half}", f"{h12}{half}"] if minute == 0 else [])


def date_phrases(day: date) -> list[str]:
    """Ways a message may state a day: ``2026-03-12``, ``March 12``, ``12 March``, ``Mar 12``."""
    month, short = day.strftime("%B"), day.strftime("%b")
    return [day.isoformat(), f"{month} {day.day}", f"{day.day} {month}", f"{short} {day.day}",
            f"{day.day} {short}"]


def _mentions(text: str, phrases: list[str]) -> bool:
    low = text.lower()
    return any(p.lower() in low for p in phrases)


def _sent_to(db: OfficeDB, address: str) -> list[dict[str, Any]]:
    return [m for m in db.emails(folder="sent") if address.lower() in [r.lower() for r in m["recipients"]]]


def _others_unchanged(db: OfficeDB, baseline: dict[str, list[dict[str, Any]]], table: str,
                      allowed: set[int], allow_new: int = 0) -> bool:
    """Every baseline row of ``table`` outside ``allowed`` is unchanged, and at most ``allow_new``
    rows were added."""
    now = {r["id"]: r for r in snapshot(db)[table]}
    before = {r["id"]: r for r in baseline[table]}
    kept = all(now.get(i) == row for i, row in before.items() if i not in allowed)
    return kept and len(set(now) - set(before)) <= allow_new


def _flag(ok: bool) -> float:
    return 1.0 if ok else 0.0


def grade(task: OfficeTask, db: OfficeDB, ids: dict[str, Any], baseline: dict[str, list[dict[str, Any]]],
          part: int = 1) -> dict[str, float]:
    """The task's named components after the episode (1.0 passed, 0.0 failed)."""
    goal = task.goal
    if task.template == "schedule_meeting":
        start = datetime.fromisoformat(goal["day"]).replace(hour=goal["hour"])
        end = start + timedelta(minutes=goal["minutes"])
        old = {e["id"] for e in baseline["events"]}
        new = [e for e in db.events() if e["id"] not in old]
        match = [e for e in new if e["start"] == start.strftime("%Y-%m-%dT%H:%M")
                 and e["end"] == end.strftime("%Y-%m-%dT%H:%M") and goal["email"] in e["attendees"]
                 and goal["topic"].lower() in e["title"].lower()]
        told = [m for m in _sent_to(db, goal["email"]) if _mentions(m["body"] + " " + m["subject"],
                                                                      time_phrases(goal["hour"]))]
        return {"event_created": _flag(len(new) == 1 and len(match) == 1),
                "email_with_time": _flag(bool(told)),
                "other_events_unchanged": _flag(_others_unchanged(db, baseline, "events", set(), allow_new=1))}
    if task.template == "reschedule_event":
        before = next(e for e in baseline["events"] if e["id"] == ids["event"])
        try:
            after = db.event(ids["event"])
        except LookupError:
            after = None
        start = datetime.fromisoformat(goal["new_start"])
        end = start + timedelta(minutes=goal["minutes"])
        moved = (after is not None and after["start"] == start.strftime("%Y-%m-%dT%H:%M")
                 and after["end"] == end.strftime("%Y-%m-%dT%H:%M"))
        same = after is not None and all(after[k] == before[k] for k in ("title", "attendees", "location"))
        return {"event_moved": _flag(moved), "event_otherwise_unchanged": _flag(same),
                "other_events_unchanged": _flag(_others_unchanged(db, baseline, "events", {ids["event"]}))}
    if task.template == "cancel_and_notify":
        gone = all(e["id"] != ids["event"] for e in db.events())
        every_told = all(any(_mentions(m["body"], [goal["reason_key"]]) for m in _sent_to(db, a))
                         for a in goal["attendees"])
        return {"event_deleted": _flag(gone), "attendees_told_why": _flag(every_told),
                "other_events_unchanged": _flag(_others_unchanged(db, baseline, "events", {ids["event"]}))}
    if task.template == "reply_email":
        day = date.fromisoformat(goal["new_day"])
        replies = _sent_to(db, goal["email"])
        return {"reply_sent": _flag(bool(replies)),
                "reply_names_the_date": _flag(any(_mentions(m["body"], date_phrases(day)) for m in replies)),
                "other_events_unchanged": _flag(_others_unchanged(db, baseline, "events", set()))}
    if task.template == "add_contact":
        digits = "".join(c for c in goal["phone"] if c.isdigit())
        found = [c for c in db.contacts() if c["name"].lower() == goal["name"].lower()]
        right = (len(found) == 1 and found[0]["email"].lower() == goal["email"].lower()
                 and "".join(c for c in found[0]["phone"] if c.isdigit()) == digits
                 and found[0]["company"].lower() == goal["company"].lower())
        parts = {"contact_added": _flag(right),
                 "other_contacts_unchanged": _flag(_others_unchanged(db, baseline, "contacts", set(), 1))}
        if part >= 2:
            first = goal["name"].split()[0].lower()
            todo = [t for t in db.todos() if first in t["title"].lower()
                    and goal["topic"].lower() in t["title"].lower() and t["due"] == goal["due"]]
            parts["followup_todo_added"] = _flag(len(todo) == 1)
        return parts
    if task.template == "complete_todos":
        mine = set(ids["todos"])
        done = all(db.todo(i)["done"] for i in mine)
        parts = {"todos_completed": _flag(done),
                 "other_todos_unchanged": _flag(_others_unchanged(db, baseline, "todos", mine, allow_new=0))}
        if part >= 2:
            parts["followup_email_sent"] = _flag(any(_mentions(m["body"] + " " + m["subject"], [goal["topic"]])
                                                     for m in _sent_to(db, goal["email"])))
        return parts
    raise ValueError(f"no grader for template {task.template!r}")
