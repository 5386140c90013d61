"""The office env: calendar, email, contacts and to-dos in SQLite, as MCP tools, with a simulated user.

Promises (all tested):

* ``reset(task=<openenv.tasks.Task>)`` (the server's ``reset(task_id=...)``) plays that task;
  ``reset(seed=k)`` plays task ``k mod 72`` of the generated list. Each episode gets a fresh
  in-memory database seeded from the task (same task, same rows and ids); ``close`` drops it;
* the reset observation (``OfficeObservation``) carries the user's request and today's date. Some
  details of the goal are withheld: ``ask_user(question)`` gets them from the user simulator
  (scripted by default; an LLM with ``OFFICE_USER_SIMULATOR=llm``, see ``user.py``);
* ``finish(summary)`` grades the database (``checks.grade``): reward 1.0 when every component
  passes, else 0.0, and the episode ends — except in the multi-turn templates, where a first
  ``finish`` with the first part done returns the user's follow-up request instead (reward 0.0,
  not done) and the next ``finish`` grades both parts. Every other step has reward 0.0;
* after ``max_steps`` steps (default 60) without a final ``finish`` the episode ends with reward 0;
* a call with wrong or missing arguments, an unknown id, a date that does not parse or a name
  where an address belongs is a structured tool error (``invalid_args``) that names the fix; the
  session stays usable. A tool call before ``reset`` is refused the same way; a step after the end
  raises ``openenv.errors.ValidationError`` (call ``reset``);
* served, the declared rubric (``rubrics.OfficeChecks``) keeps the reward and adds the grader's
  checks as ``reward_components`` on the ``finish`` step.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any, Literal

from openenv.errors import ValidationError
from openenv.tasks import checked_task
from openenv.tools import ToolCallError, ToolEnvironment, ToolError, ToolErrorType, tool
from openenv.tools.wire import CallToolObservation
from openenv.types import Action, EnvironmentMetadata, Observation
from openenv_env_office.checks import grade, snapshot
from openenv_env_office.db import USER_EMAIL, OfficeDB, RecordNotFound
from openenv_env_office.models import OfficeObservation, OfficeState
from openenv_env_office.rubrics import OfficeChecks
from openenv_env_office.tasks import TASK_SOURCE, TASKS, OfficeTask, build_db, from_declared
from openenv_env_office.user import UserSimulator, UserSimulatorError, user_from_env

__all__ = ["DEFAULT_MAX_STEPS", "OfficeEnv"]

DEFAULT_MAX_STEPS = 60
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _bad(message: str) -> ToolCallError:
    return ToolCallError(ToolErrorType.INVALID_ARGS, message)


class OfficeEnv(ToolEnvironment):
    """An office app with real state. Instances share nothing, so one server holds many sessions."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Every tool is a few SQLite statements on an in-memory database: run inline.
    BLOCKING = False
    # Steps are tool calls (a CallToolObservation each); only reset returns the task's briefing. Said
    # here, or the briefing's type would be inferred for steps too and /schema would describe them wrongly.
    observation_type = CallToolObservation
    reset_observation_type = OfficeObservation
    tasks = TASK_SOURCE
    # Served, the grader's checks travel as reward components (the score is the env's reward).
    rubric = OfficeChecks()

    def __init__(self, *, user: UserSimulator | None = None, max_steps: int = DEFAULT_MAX_STEPS) -> None:
        super().__init__()
        self.user = user if user is not None else user_from_env()
        self.max_steps = max_steps
        self._task: OfficeTask | None = None
        self._db: OfficeDB | None = None
        self._ids: dict[str, Any] = {}
        self._baseline: dict[str, list[dict[str, Any]]] = {}
        self._part = 1
        self._done = False
        self._questions = 0

    # -- protocol ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              **kwargs: Any) -> OfficeObservation:
        declared = kwargs.pop("task", None)
        if kwargs:
            raise ValidationError(f"unknown reset option(s) {sorted(kwargs)}; the office env takes seed, "
                                  "episode_id and task (reset(task_id=...) through a client)")
        if declared is not None:
            declared = checked_task(declared)
            try:
                task = from_declared(declared)
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
        else:
            task = TASKS[(seed or 0) % len(TASKS)]
        super().reset(seed=seed, episode_id=episode_id)
        self._close_db()
        self._task = task
        self._db, self._ids = build_db(task)
        self._baseline = snapshot(self._db)
        self._part, self._done, self._questions = 1, False, 0
        return OfficeObservation(
            task_id=task.id, today=task.today, weekday=_WEEKDAYS[task.day.weekday()], request=task.request,
            user_email=USER_EMAIL, max_steps=self.max_steps, done=False, reward=0.0,
            metadata={"task_id": task.id, "turn": 0, "part": 1})

    def step(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> Observation:
        if self._done:
            raise ValidationError("the episode is over (finish was called or the step limit was reached): "
                                  "call reset() to start another")
        obs = super().step(action, timeout_s=timeout_s, **kwargs)
        if obs.reward is None:
            obs.reward = 0.0
        turn = self.state.step_count
        if not obs.done and self._task is not None and not self._done and turn >= self.max_steps:
            self._done = True
            obs.done, obs.reward = True, 0.0
            obs.metadata["truncated"] = True
        obs.metadata.update({"task_id": self._task.id if self._task else None, "turn": turn, "part": self._part})
        return obs

    @property
    def state(self) -> OfficeState:  # type: ignore[override]
        base = super().state
        return OfficeState(episode_id=base.episode_id, step_count=base.step_count,
                           task_id=self._task.id if self._task else None, part=self._part, done=self._done,
                           questions=self._questions)

    def close(self) -> None:
        self._close_db()
        super().close()

    def _close_db(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="office",
            description="An office app (calendar, email, contacts, to-dos in SQLite) as MCP tools with a "
            "simulated user; finish() grades the database: reward 1.0 when the goal state is reached.",
            version="0.1.0",
        )

    def reward_for_tool_call(self, tool_name: str, arguments: dict[str, Any], result: Any,
                             error: ToolError | None) -> tuple[float | None, bool]:
        if tool_name == "finish" and error is None and isinstance(result, dict) and "reward" in result:
            return float(result["reward"]), bool(result["done"])
        return 0.0, False

    # -- helpers ----------------------------------------------------------------------------------

    def _app(self) -> tuple[OfficeTask, OfficeDB]:
        if self._task is None or self._db is None:
            raise _bad("no episode in progress: call reset() first")
        return self._task, self._db

    def _day(self, name: str, value: str) -> date:
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            today = self._task.today if self._task else "2026-03-02"
            raise _bad(f"{name}={value!r} is not a date; write it as YYYY-MM-DD, e.g. {name}='{today}'") from None

    def _moment(self, name: str, value: str) -> datetime:
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            today = self._task.today if self._task else "2026-03-02"
            raise _bad(f"{name}={value!r} is not a date and time; write it as YYYY-MM-DDTHH:MM, "
                       f"e.g. {name}='{today}T15:00'") from None
        return moment.replace(second=0, microsecond=0, tzinfo=None)

    def _addresses(self, db: OfficeDB, name: str, values: list[str]) -> list[str]:
        out = []
        for value in values:
            value = value.strip()
            if _ADDRESS.match(value):
                out.append(value.lower())
                continue
            found = db.contacts(value) if value else []
            hint = (f"did you mean {found[0]['email']!r} ({found[0]['name']})?" if found
                    else "look the address up with list_contacts(query)")
            raise _bad(f"{name} holds {value!r}, which is not an email address; {hint}")
        return out

    def _lookup(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except RecordNotFound as exc:
            raise _bad(str(exc)) from None

    # -- calendar ---------------------------------------------------------------------------------

    @tool
    def list_events(self, date_from: str, date_to: str) -> list[dict[str, Any]]:
        """List calendar events whose start falls between two days (inclusive).

        Args:
            date_from: First day, YYYY-MM-DD.
            date_to: Last day, YYYY-MM-DD.
        """
        _, db = self._app()
        low, high = self._day("date_from", date_from), self._day("date_to", date_to)
        if high < low:
            raise _bad(f"date_to {date_to} is before date_from {date_from}; swap them")
        return db.events(low, high)

    @tool
    def create_event(self, title: str, start: str, end: str, attendees: list[str] | None = None,
                     location: str = "") -> dict[str, Any]:
        """Create a calendar event and return it (with its id).

        Args:
            title: Title of the event.
            start: Start, YYYY-MM-DDTHH:MM.
            end: End, YYYY-MM-DDTHH:MM (after start).
            attendees: Email addresses of the people invited.
            location: Where it takes place.
        """
        _, db = self._app()
        begin, finish = self._moment("start", start), self._moment("end", end)
        if finish <= begin:
            raise _bad(f"end {end} is not after start {start}; give the end time of the event")
        if not title.strip():
            raise _bad("title is empty; give the event a title")
        return db.add_event(title.strip(), begin, finish, self._addresses(db, "attendees", attendees or []),
                            location)

    @tool
    def update_event(self, event_id: int, title: str | None = None, start: str | None = None,
                     end: str | None = None, attendees: list[str] | None = None,
                     location: str | None = None) -> dict[str, Any]:
        """Change fields of an event (only those given) and return it.

        Args:
            event_id: Id of the event (from list_events).
            title: New title.
            start: New start, YYYY-MM-DDTHH:MM (without end, the event keeps its length).
            end: New end, YYYY-MM-DDTHH:MM.
            attendees: New list of attendee addresses (replaces the old one).
            location: New location.
        """
        _, db = self._app()
        current = self._lookup(db.event, event_id)
        old_start, old_end = datetime.fromisoformat(current["start"]), datetime.fromisoformat(current["end"])
        begin = self._moment("start", start) if start is not None else old_start
        # A new start without a new end moves the event and keeps its length.
        finish = self._moment("end", end) if end is not None else begin + (old_end - old_start)
        if finish <= begin:
            raise _bad(f"the event would end ({finish:%Y-%m-%dT%H:%M}) before it starts ({begin:%Y-%m-%dT%H:%M}); "
                       "give an end after the start")
        people = self._addresses(db, "attendees", attendees) if attendees is not None else None
        return db.update_event(event_id, title=title, start=begin, end=finish, attendees=people, location=location)

    @tool
    def delete_event(self, event_id: int) -> dict[str, Any]:
        """Delete an event.

        Args:
            event_id: Id of the event (from list_events).
        """
        _, db = self._app()
        self._lookup(db.delete_event, event_id)
        return {"deleted": event_id}

    # -- email ------------------------------------------------------------------------------------

    @tool
    def search_emails(self, query: str = "", folder: Literal["inbox", "sent", "all"] = "all") -> list[dict[str, Any]]:
        """Find emails whose subject, body, sender or recipients contain the query.

        Args:
            query: Text to look for (empty lists every email of the folder).
            folder: inbox, sent or all.
        """
        _, db = self._app()
        return [{k: m[k] for k in ("id", "folder", "sender", "recipients", "subject", "sent_on")}
                for m in db.emails(query, folder)]

    @tool
    def read_email(self, email_id: int) -> dict[str, Any]:
        """Read one email in full.

        Args:
            email_id: Id of the email (from search_emails).
        """
        _, db = self._app()
        return self._lookup(db.email, email_id)  # type: ignore[no-any-return]

    @tool
    def send_email(self, to: list[str], subject: str, body: str) -> dict[str, Any]:
        """Send an email from the user's address; it lands in the sent folder.

        Args:
            to: Recipient email addresses.
            subject: Subject line.
            body: Text of the message.
        """
        task, db = self._app()
        if not to:
            raise _bad("to is empty; give at least one recipient address")
        return db.add_email("sent", USER_EMAIL, self._addresses(db, "to", to), subject, body, task.day)

    # -- contacts ---------------------------------------------------------------------------------

    @tool
    def list_contacts(self, query: str = "") -> list[dict[str, Any]]:
        """List contacts whose name, email or company contains the query.

        Args:
            query: Text to look for (empty lists everyone).
        """
        _, db = self._app()
        return db.contacts(query)

    @tool
    def add_contact(self, name: str, email: str, phone: str = "", company: str = "") -> dict[str, Any]:
        """Add a contact and return it.

        Args:
            name: Full name.
            email: Email address.
            phone: Phone number.
            company: Company they work for.
        """
        _, db = self._app()
        if not name.strip():
            raise _bad("name is empty; give the contact's full name")
        (address,) = self._addresses(db, "email", [email])
        return db.add_contact(name.strip(), address, phone.strip(), company.strip())

    # -- to-dos -----------------------------------------------------------------------------------

    @tool
    def list_todos(self, include_done: bool = False) -> list[dict[str, Any]]:
        """List to-do items (open ones unless include_done).

        Args:
            include_done: Also list completed items.
        """
        _, db = self._app()
        return db.todos(include_done)

    @tool
    def add_todo(self, title: str, due: str | None = None) -> dict[str, Any]:
        """Add a to-do item and return it.

        Args:
            title: What to do.
            due: Due day, YYYY-MM-DD (optional).
        """
        _, db = self._app()
        if not title.strip():
            raise _bad("title is empty; say what the to-do is")
        return db.add_todo(title.strip(), self._day("due", due) if due is not None else None)

    @tool
    def complete_todo(self, todo_id: int) -> dict[str, Any]:
        """Mark a to-do item done and return it.

        Args:
            todo_id: Id of the item (from list_todos).
        """
        _, db = self._app()
        return self._lookup(db.complete_todo, todo_id)  # type: ignore[no-any-return]

    # -- the user ---------------------------------------------------------------------------------

    @tool
    def ask_user(self, question: str) -> dict[str, Any]:
        """Ask the user a question about their request; returns their answer.

        Args:
            question: The question, in plain words.
        """
        task, _ = self._app()
        if not question.strip():
            raise _bad("question is empty; ask about the detail you are missing (e.g. 'What time?')")
        self._questions += 1
        try:
            return {"answer": self.user.answer(task, question)}
        except UserSimulatorError as exc:
            raise ToolCallError(ToolErrorType.EXECUTION_ERROR, str(exc)) from None

    @tool
    def finish(self, summary: str) -> dict[str, Any]:
        """Tell the user the request is done. The user may answer with a follow-up request;
        otherwise the episode ends and the result is graded.

        Args:
            summary: What you did, in a sentence or two.
        """
        task, db = self._app()
        checks = grade(task, db, self._ids, self._baseline, part=self._part)
        passed = all(v == 1.0 for v in checks.values())
        if passed and self._part == 1 and task.followup:
            self._part = 2
            return {"done": False, "reward": 0.0, "user": task.followup, "checks": checks}
        self._done = True
        return {"done": True, "reward": 1.0 if passed else 0.0, "checks": checks}
