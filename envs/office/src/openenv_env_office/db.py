"""The office app's state: one in-memory SQLite database per episode.

Tables: ``contacts``, ``events`` (start/end as ``YYYY-MM-DDTHH:MM``, attendees as a sorted JSON list
of addresses), ``emails`` (``folder`` is ``inbox`` or ``sent``) and ``todos``. ``OfficeDB`` holds
the connection and the typed operations the tools call; every operation that names a record by id
raises ``RecordNotFound`` when there is none, so the tool layer can turn it into a structured error.

``seed_world(db, seed, today)`` fills the background of a task: contacts, meetings, inbox mail and
to-dos drawn from ``random.Random(seed)`` with dates relative to the task's ``today``. The same
seed and day always give the same rows and the same ids.
"""

from __future__ import annotations

import json
import random
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

__all__ = [
    "FIRST_NAMES",
    "LAST_NAMES",
    "OfficeDB",
    "Person",
    "USER_EMAIL",
    "RecordNotFound",
    "email_of",
    "people",
    "seed_world",
]

# AUTOINCREMENT: an id is never reused after a delete, so "the rows added during the episode" is
# exactly "ids above the seeded ones" for the graders.
SCHEMA = """
CREATE TABLE contacts (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, email TEXT NOT NULL,
                       phone TEXT NOT NULL DEFAULT '', company TEXT NOT NULL DEFAULT '');
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, start TEXT NOT NULL, end TEXT NOT NULL,
                     location TEXT NOT NULL DEFAULT '', attendees TEXT NOT NULL DEFAULT '[]');
CREATE TABLE emails (id INTEGER PRIMARY KEY AUTOINCREMENT, folder TEXT NOT NULL CHECK (folder IN ('inbox', 'sent')),
                     sender TEXT NOT NULL, recipients TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL,
                     sent_on TEXT NOT NULL);
CREATE TABLE todos (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, due TEXT,
                    done INTEGER NOT NULL DEFAULT 0);
"""

FIRST_NAMES = ("Dana", "Omar", "Priya", "Lukas", "Mei", "Tomas", "Aisha", "Jonas", "Elena", "Kofi",
               "Sofia", "Ravi", "Hana", "Mateo", "Ingrid", "Yusuf", "Clara", "Nikhil", "Zoe", "Felix")
LAST_NAMES = ("Ruiz", "Haddad", "Natarajan", "Berg", "Chen", "Novak", "Bello", "Lindqvist", "Petrova",
              "Mensah", "Rossi", "Iyer", "Sato", "Alvarez", "Holm", "Demir", "Weber", "Rao", "Park", "Klein")
COMPANIES = ("Northwind", "Globex", "Initech", "Umbrella Labs", "Vandelay", "Stark Freight")
_MEETINGS = ("Weekly 1:1", "Design review", "Budget check-in", "Hiring panel", "Team lunch", "Vendor call")
_CHORES = ("Book travel", "Renew parking permit", "Expense report", "Update slide deck", "Order toner")
_MAIL = (("Lunch on Friday?", "Are you free for lunch on Friday?"),
         ("Slides", "Attaching the slides from yesterday."),
         ("Parking", "The parking garage is closed next Monday."),
         ("Newsletter", "This month's company newsletter is out."))

#: The address the user sends from.
USER_EMAIL = "me@office.example"


class RecordNotFound(LookupError):
    """An id that names no record of a table."""

    def __init__(self, table: str, record_id: int, hint: str) -> None:
        super().__init__(f"there is no {table[:-1]} with id {record_id}; {hint}")
        self.table, self.record_id = table, record_id


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    phone: str
    company: str

    @property
    def first(self) -> str:
        return self.name.split()[0]


def email_of(name: str) -> str:
    """The address a generated person has (``dana.ruiz@<company>.example`` style, company-free)."""
    return name.lower().replace(" ", ".") + "@mail.example"


def _phone(rng: random.Random) -> str:
    return f"+1-555-{rng.randrange(100, 1000)}-{rng.randrange(1000, 10000)}"


class OfficeDB:
    """One episode's database (in memory: nothing outlives ``close``)."""

    def __init__(self) -> None:
        # Tool bodies may run on a worker thread; the env serialises calls, so sharing is safe.
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.executescript(SCHEMA)

    def close(self) -> None:
        self.conn.close()

    # -- contacts --------------------------------------------------------------------------------

    def add_contact(self, name: str, email: str, phone: str = "", company: str = "") -> dict[str, Any]:
        cur = self.conn.execute("INSERT INTO contacts (name, email, phone, company) VALUES (?, ?, ?, ?)",
                                (name, email, phone, company))
        return self.contact(int(cur.lastrowid or 0))

    def contact(self, contact_id: int) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM contacts WHERE id = ?", (contact_id,)).fetchone()
        if row is None:
            raise RecordNotFound("contacts", contact_id, "call list_contacts to see the ids")
        return dict(row)

    def contacts(self, query: str = "") -> list[dict[str, Any]]:
        like = f"%{query.strip().lower()}%"
        rows = self.conn.execute(
            "SELECT * FROM contacts WHERE lower(name) LIKE ? OR lower(email) LIKE ? OR lower(company) LIKE ? "
            "ORDER BY id", (like, like, like))
        return [dict(r) for r in rows]

    # -- events ----------------------------------------------------------------------------------

    def add_event(self, title: str, start: datetime, end: datetime, attendees: list[str],
                  location: str = "") -> dict[str, Any]:
        cur = self.conn.execute(
            "INSERT INTO events (title, start, end, location, attendees) VALUES (?, ?, ?, ?, ?)",
            (title, _stamp(start), _stamp(end), location, json.dumps(sorted(set(attendees)))))
        return self.event(int(cur.lastrowid or 0))

    def event(self, event_id: int) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM events WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            raise RecordNotFound("events", event_id, "call list_events(date_from, date_to) to see the ids")
        return _event_dict(row)

    def events(self, date_from: date | None = None, date_to: date | None = None) -> list[dict[str, Any]]:
        low = date_from.isoformat() if date_from else "0000"
        high = (date_to.isoformat() if date_to else "9999") + "T99"  # inclusive of the whole last day
        rows = self.conn.execute("SELECT * FROM events WHERE start >= ? AND start <= ? ORDER BY start, id",
                                 (low, high))
        return [_event_dict(r) for r in rows]

    def update_event(self, event_id: int, **changes: Any) -> dict[str, Any]:
        self.event(event_id)
        for key, value in changes.items():
            if value is None:
                continue
            if key in ("start", "end"):
                value = _stamp(value)
            elif key == "attendees":
                value = json.dumps(sorted(set(value)))
            # key comes from the tool's fixed parameter names, never from the caller's text
            self.conn.execute(f"UPDATE events SET {key} = ? WHERE id = ?", (value, event_id))
        return self.event(event_id)

    def delete_event(self, event_id: int) -> None:
        self.event(event_id)
        self.conn.execute("DELETE FROM events WHERE id = ?", (event_id,))

    # -- emails ----------------------------------------------------------------------------------

    def add_email(self, folder: str, sender: str, recipients: list[str], subject: str, body: str,
                  sent_on: date) -> dict[str, Any]:
        cur = self.conn.execute(
            "INSERT INTO emails (folder, sender, recipients, subject, body, sent_on) VALUES (?, ?, ?, ?, ?, ?)",
            (folder, sender, json.dumps(recipients), subject, body, sent_on.isoformat()))
        return self.email(int(cur.lastrowid or 0))

    def email(self, email_id: int) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM emails WHERE id = ?", (email_id,)).fetchone()
        if row is None:
            raise RecordNotFound("emails", email_id, "call search_emails(query) to see the ids")
        return _email_dict(row)

    def emails(self, query: str = "", folder: str = "all") -> list[dict[str, Any]]:
        like = f"%{query.strip().lower()}%"
        sql = ("SELECT * FROM emails WHERE (lower(subject) LIKE ? OR lower(body) LIKE ? OR lower(sender) LIKE ? "
               "OR lower(recipients) LIKE ?)")
        args: list[Any] = [like] * 4
        if folder != "all":
            sql += " AND folder = ?"
            args.append(folder)
        return [_email_dict(r) for r in self.conn.execute(sql + " ORDER BY id", args)]

    # -- to-dos ----------------------------------------------------------------------------------

    def add_todo(self, title: str, due: date | None) -> dict[str, Any]:
        cur = self.conn.execute("INSERT INTO todos (title, due) VALUES (?, ?)",
                                (title, due.isoformat() if due else None))
        return self.todo(int(cur.lastrowid or 0))

    def todo(self, todo_id: int) -> dict[str, Any]:
        row = self.conn.execute("SELECT * FROM todos WHERE id = ?", (todo_id,)).fetchone()
        if row is None:
            raise RecordNotFound("todos", todo_id, "call list_todos to see the ids")
        return {**dict(row), "done": bool(row["done"])}

    def todos(self, include_done: bool = False) -> list[dict[str, Any]]:
        sql = "SELECT id FROM todos" + ("" if include_done else " WHERE done = 0") + " ORDER BY id"
        return [self.todo(r["id"]) for r in self.conn.execute(sql).fetchall()]

    def complete_todo(self, todo_id: int) -> dict[str, Any]:
        self.todo(todo_id)
        self.conn.execute("UPDATE todos SET done = 1 WHERE id = ?", (todo_id,))
        return self.todo(todo_id)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M")


def _event_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {**dict(row), "attendees": json.loads(row["attendees"])}


def _email_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {**dict(row), "recipients": json.loads(row["recipients"])}


def people(rng: random.Random, count: int) -> list[Person]:
    """``count`` distinct generated people."""
    names: list[str] = []
    while len(names) < count:  # 400 possible names; count stays far below
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        if name not in names and name.split()[0] not in {n.split()[0] for n in names}:
            names.append(name)
    return [Person(n, email_of(n), _phone(rng), rng.choice(COMPANIES)) for n in names]


def seed_world(db: OfficeDB, seed: int, today: date, cast: list[Person]) -> None:
    """The background of a task: ``cast`` as contacts, plus meetings, inbox mail and to-dos from
    ``random.Random(seed)`` in the two weeks around ``today``."""
    rng = random.Random(seed * 7919 + 17)
    for person in cast:
        db.add_contact(person.name, person.email, person.phone, person.company)
    for k, title in enumerate(rng.sample(_MEETINGS, 4)):
        day = today + timedelta(days=rng.randrange(-3, 12))
        start = datetime(day.year, day.month, day.day, 9 + 2 * (k % 4))
        who = rng.sample(cast, 2)
        db.add_event(title, start, start + timedelta(minutes=rng.choice((30, 60))), [p.email for p in who],
                     location=rng.choice(("Room 1", "Room 2", "Video call")))
    for subject, body in rng.sample(_MAIL, 3):
        sender = rng.choice(cast)
        db.add_email("inbox", sender.email, [USER_EMAIL], subject, f"Hi,\n\n{body}\n\n{sender.first}",
                     today - timedelta(days=rng.randrange(1, 6)))
    for title in rng.sample(_CHORES, 3):
        db.add_todo(title, today + timedelta(days=rng.randrange(1, 10)))
