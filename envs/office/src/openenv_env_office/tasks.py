"""The office tasks: six templates × twelve seeds, generated deterministically.

A task is a user's request (what the agent is told), a hidden ``goal`` (the slots a grader checks),
the ``answers`` the scripted user gives when asked (keyword → reply; some slots of the goal are
left out of the request, so the agent must ``ask_user``), and for the multi-turn templates a
``followup`` the user adds once the first part is done. ``build_db(task)`` makes the task's
database: the seeded background (``db.seed_world``) plus the records the template needs; it
returns the ids of those records, so the grader and the oracle name them without searching.

Splits are disjoint by template instance: seeds 0–8 of every template are ``train``, seeds 9–11
``test`` (ids ``<template>-<seed>``). ``TASK_SOURCE`` declares them to the kernel's task API.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from openenv.tasks import InlineTasks
from openenv.tasks import Task as DeclaredTask
from openenv_env_office.db import (
    FIRST_NAMES,
    LAST_NAMES,
    USER_EMAIL,
    OfficeDB,
    Person,
    email_of,
    people,
    seed_world,
)

__all__ = [
    "TASKS",
    "TASK_SOURCE",
    "TEMPLATES",
    "OfficeTask",
    "build_db",
    "from_declared",
    "generate",
    "spoken_date",
]

TEMPLATES = ("schedule_meeting", "reschedule_event", "cancel_and_notify", "reply_email", "add_contact",
             "complete_todos")
SEEDS_PER_TEMPLATE = 12
TRAIN_SEEDS = range(0, 9)
_BASE_DAY = date(2026, 3, 2)
_TOPICS = ("Q3 budget", "website relaunch", "onboarding guide", "vendor contract", "security audit",
           "annual report", "product launch", "customer survey")
_REASONS = (("a customer visit", "customer visit"), ("a doctor's appointment", "doctor"),
            ("a conflicting board meeting", "board meeting"), ("a flight that day", "flight"))
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def spoken_date(day: date) -> str:
    """``Tuesday, March 10`` — how the user names a day."""
    return f"{_WEEKDAYS[day.weekday()]}, {day.strftime('%B')} {day.day}"


def _next_weekday(today: date, rng: random.Random) -> date:
    day = today + timedelta(days=rng.randrange(1, 8))
    while day.weekday() >= 5:  # bounded: at most two weekend days in a row
        day += timedelta(days=1)
    return day


@dataclass(frozen=True)
class OfficeTask:
    """One task: what the user asks, what they want (hidden) and how they answer questions."""

    id: str
    split: str
    template: str
    seed: int
    today: str
    request: str
    goal: dict[str, Any]
    cast: list[dict[str, str]]
    answers: list[dict[str, Any]] = field(default_factory=list)
    followup: str | None = None

    @property
    def day(self) -> date:
        return date.fromisoformat(self.today)

    def person(self, email: str) -> Person:
        return next(Person(**p) for p in self.cast if p["email"] == email)

    def to_data(self) -> dict[str, Any]:
        return {"template": self.template, "today": self.today, "request": self.request, "goal": self.goal,
                "cast": self.cast, "answers": self.answers, "followup": self.followup}


def _answer(keywords: list[str], text: str) -> dict[str, Any]:
    return {"keywords": keywords, "answer": text}


def _make(template: str, seed: int) -> OfficeTask:
    rng = random.Random(f"office/{template}/{seed}")
    today = _BASE_DAY + timedelta(days=seed * 5 + TEMPLATES.index(template))
    cast = people(rng, 6)
    topic = rng.choice(_TOPICS)
    goal: dict[str, Any]
    answers: list[dict[str, Any]] = []
    followup: str | None = None
    if template == "schedule_meeting":
        who, day = cast[0], _next_weekday(today, rng)
        hour, minutes = rng.choice((13, 14, 15, 16)), rng.choice((30, 45, 60))
        goal = {"email": who.email, "day": day.isoformat(), "hour": hour, "minutes": minutes, "topic": topic}
        request = (f"Please set up a meeting about the {topic} with {who.name} on {spoken_date(day)}, "
                   f"and email {who.first} the time.")
        answers = [_answer(["time", "when", "start", "hour", "o'clock"], f"Let's start at {hour:02d}:00."),
                   _answer(["long", "duration", "length", "minutes"], f"{minutes} minutes."),
                   _answer(["title", "call it", "name it"], f"Call it '{topic.capitalize()} sync'."),
                   _answer(["where", "location", "room"], "A video call is fine.")]
    elif template == "reschedule_event":
        day, new_day = _next_weekday(today, rng), _next_weekday(today, rng)
        hour, new_hour, minutes = rng.choice((9, 10, 11)), rng.choice((13, 14, 15, 16)), rng.choice((30, 60))
        title = f"{topic.capitalize()} review"
        goal = {"title": title, "start": f"{day.isoformat()}T{hour:02d}:00", "minutes": minutes,
                "attendees": [cast[1].email], "new_start": f"{new_day.isoformat()}T{new_hour:02d}:00"}
        request = (f"Something came up: please move my '{title}' on {spoken_date(day)} to a different time "
                   "and keep the same length.")
        answers = [_answer(["time", "when", "day", "date", "move it", "where to", "new"],
                           f"Move it to {spoken_date(new_day)} at {new_hour:02d}:00.")]
    elif template == "cancel_and_notify":
        day = _next_weekday(today, rng)
        reason, key = rng.choice(_REASONS)
        title = f"{topic.capitalize()} planning"
        goal = {"title": title, "start": f"{day.isoformat()}T{rng.choice((10, 11, 14)):02d}:00",
                "attendees": sorted([cast[2].email, cast[3].email]), "reason": reason, "reason_key": key}
        request = f"Please cancel the '{title}' on {spoken_date(day)} and let everyone invited know why."
        answers = [_answer(["why", "reason", "tell them", "explain"], f"Tell them I have {reason}.")]
    elif template == "reply_email":
        who, new_day = cast[4], _next_weekday(today + timedelta(days=7), rng)
        goal = {"email": who.email, "topic": topic, "new_day": new_day.isoformat()}
        request = f"{who.first} emailed me about the {topic} deadline. Please reply to them."
        answers = [_answer(["date", "deadline", "when", "reply", "say", "answer", "tell"],
                           f"Tell {who.first} the new deadline is {spoken_date(new_day)}.")]
    elif template == "add_contact":
        # Someone not yet in the contacts: a first name no cast member has.
        first = rng.choice([n for n in FIRST_NAMES if n not in {p.first for p in cast}])
        name = f"{first} {rng.choice(LAST_NAMES)}"
        new = Person(name, email_of(name), f"+1-555-{rng.randrange(100, 1000)}-{rng.randrange(1000, 10000)}", "")
        company = rng.choice(("Northwind", "Globex", "Initech", "Vandelay"))
        due = _next_weekday(today, rng)
        goal = {"name": new.name, "email": new.email, "phone": new.phone, "company": company,
                "topic": topic, "due": due.isoformat()}
        request = f"Please add {new.name} from {company} to my contacts."
        answers = [_answer(["email", "address", "e-mail"], f"Their email is {new.email}."),
                   _answer(["phone", "number", "call"], f"Their phone number is {new.phone}.")]
        followup = (f"Thanks! One more thing: add a to-do to send {new.first} the {topic} proposal, "
                    f"due {spoken_date(due)}.")
    elif template == "complete_todos":
        boss = cast[5]
        goal = {"topic": topic, "titles": [f"{topic.capitalize()}: draft", f"{topic.capitalize()}: review"],
                "email": boss.email}
        request = f"I wrapped up everything for the {topic}. Please tick off those to-dos."
        followup = f"Great. Now email {boss.name} to say the {topic} work is finished."
    else:  # pragma: no cover - TEMPLATES is the list above
        raise ValueError(f"unknown template {template!r}; the templates are {list(TEMPLATES)}")
    return OfficeTask(
        id=f"{template}-{seed}", split="train" if seed in TRAIN_SEEDS else "test", template=template, seed=seed,
        today=today.isoformat(), request=request, goal=goal,
        cast=[{"name": p.name, "email": p.email, "phone": p.phone, "company": p.company} for p in cast],
        answers=answers, followup=followup)


def generate() -> tuple[OfficeTask, ...]:
    """Every task, template by template, seed by seed (the same list on every call)."""
    return tuple(_make(t, s) for t in TEMPLATES for s in range(SEEDS_PER_TEMPLATE))


TASKS: tuple[OfficeTask, ...] = generate()

#: The tasks as the kernel's task source: 54 ``train``, 18 ``test`` (``OfficeEnv.tasks``).
TASK_SOURCE = InlineTasks([DeclaredTask(id=t.id, split=t.split, seed=t.seed, data=t.to_data()) for t in TASKS],
                          name="openenv_env_office.tasks.TASKS")


def from_declared(task: DeclaredTask) -> OfficeTask:
    """The office task a declared task's data describes (``ValueError`` saying what is missing)."""
    data = task.data
    missing = [k for k in ("template", "today", "request", "goal", "cast") if k not in data]
    if missing or data.get("template") not in TEMPLATES:
        raise ValueError(f"task {task.id!r} is not an office task: missing {missing or ['a known template']}; "
                         f"its data needs template (one of {list(TEMPLATES)}), today, request, goal and cast")
    return OfficeTask(id=task.id, split=task.split, seed=task.seed or 0, template=data["template"],
                      today=data["today"], request=data["request"], goal=data["goal"], cast=data["cast"],
                      answers=list(data.get("answers") or []), followup=data.get("followup"))


def build_db(task: OfficeTask) -> tuple[OfficeDB, dict[str, Any]]:
    """The task's database and the ids of the records its template placed there."""
    db = OfficeDB()
    cast = [Person(**p) for p in task.cast]
    seed_world(db, task.seed, task.day, cast)
    goal, ids = task.goal, {}
    if task.template in ("reschedule_event", "cancel_and_notify"):
        start = datetime.fromisoformat(goal["start"])
        event = db.add_event(goal["title"], start, start + timedelta(minutes=goal.get("minutes", 60)),
                             goal["attendees"], location="Room 3")
        ids["event"] = event["id"]
    elif task.template == "reply_email":
        who = task.person(goal["email"])
        body = f"Hi,\n\nCan we push the {goal['topic']} deadline? Which date works for you?\n\n{who.first}"
        mail = db.add_email("inbox", who.email, [USER_EMAIL], f"{goal['topic'].capitalize()} deadline", body,
                            task.day - timedelta(days=1))
        ids["email"] = mail["id"]
    elif task.template == "complete_todos":
        ids["todos"] = [db.add_todo(title, task.day + timedelta(days=2))["id"] for title in goal["titles"]]
    db.conn.commit()
    return db, ids
