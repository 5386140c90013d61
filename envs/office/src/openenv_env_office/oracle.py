"""Scripted policies of the office env: the oracle (reads the hidden goal) and a no-op baseline.

``plan(task)`` is the oracle's whole episode as tool-call actions: it asks the user what the
request leaves out (as an agent must), then acts through the same tools and calls ``finish`` —
twice in the multi-turn templates, with the follow-up's work between. ``oracle(obs)`` is the
manifest's ``oracle:`` (an observation dict in, an action dict out): it needs no memory, because
every observation's ``metadata`` names the task and the turn. ``noop(obs)`` finishes at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from openenv.types import Observation
from openenv_env_office.tasks import TASKS, OfficeTask, build_db, spoken_date

__all__ = ["noop", "oracle", "plan"]


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


def _ids_of(task: OfficeTask) -> dict[str, Any]:
    db, ids = build_db(task)  # the same seeded database the episode has: same ids
    db.close()
    return ids


def plan(task: OfficeTask) -> list[dict[str, Any]]:
    """Every action of an episode that reaches reward 1.0 on ``task``."""
    goal, ids = task.goal, _ids_of(task)
    done = _call("finish", summary="Done.")
    if task.template == "schedule_meeting":
        start = datetime.fromisoformat(goal["day"]).replace(hour=goal["hour"])
        end = start + timedelta(minutes=goal["minutes"])
        when = f"{spoken_date(start.date())} at {goal['hour']:02d}:00"
        return [_call("ask_user", question="What time should it start, and how long should it be?"),
                _call("create_event", title=f"{goal['topic'].capitalize()} sync", start=f"{start:%Y-%m-%dT%H:%M}",
                      end=f"{end:%Y-%m-%dT%H:%M}", attendees=[goal["email"]]),
                _call("send_email", to=[goal["email"]], subject=f"Meeting about the {goal['topic']}",
                      body=f"Hi, I booked our meeting for {when} ({goal['minutes']} minutes)."),
                done]
    if task.template == "reschedule_event":
        start = datetime.fromisoformat(goal["new_start"])
        end = start + timedelta(minutes=goal["minutes"])
        return [_call("ask_user", question="When should I move it to?"),
                _call("update_event", event_id=ids["event"], start=f"{start:%Y-%m-%dT%H:%M}",
                      end=f"{end:%Y-%m-%dT%H:%M}"),
                done]
    if task.template == "cancel_and_notify":
        return [_call("ask_user", question="What reason should I give them?"),
                _call("delete_event", event_id=ids["event"]),
                _call("send_email", to=goal["attendees"], subject=f"Cancelled: {goal['title']}",
                      body=f"Sorry, the {goal['title']} is cancelled: I have {goal['reason']}."),
                done]
    if task.template == "reply_email":
        day = datetime.fromisoformat(goal["new_day"]).date()
        return [_call("ask_user", question="What should I tell them about the deadline?"),
                _call("send_email", to=[goal["email"]], subject=f"Re: {goal['topic'].capitalize()} deadline",
                      body=f"Hi, the new deadline is {spoken_date(day)}."),
                done]
    if task.template == "add_contact":
        first = goal["name"].split()[0]
        return [_call("ask_user", question="What is their email address and phone number?"),
                _call("add_contact", name=goal["name"], email=goal["email"], phone=goal["phone"],
                      company=goal["company"]),
                done,
                _call("add_todo", title=f"Send {first} the {goal['topic']} proposal", due=goal["due"]),
                done]
    if task.template == "complete_todos":
        return [*(_call("complete_todo", todo_id=i) for i in ids["todos"]),
                done,
                _call("send_email", to=[goal["email"]], subject=f"{goal['topic'].capitalize()} finished",
                      body=f"Hi, the {goal['topic']} work is finished."),
                done]
    raise ValueError(f"no plan for template {task.template!r}")


@lru_cache(maxsize=128)
def _plan_of(task_id: str) -> tuple[dict[str, Any], ...]:
    task = next((t for t in TASKS if t.id == task_id), None)
    if task is None:
        raise ValueError(f"unknown office task {task_id!r}; the oracle plays the generated tasks (tasks.TASKS)")
    return tuple(plan(task))


def _metadata(obs: Observation | Mapping[str, Any]) -> Mapping[str, Any]:
    data = obs.model_dump() if isinstance(obs, Observation) else obs
    meta = data.get("metadata") or {}
    if "task_id" not in meta or "turn" not in meta:
        raise ValueError("the observation's metadata has no task_id/turn; pass an office env observation")
    return meta  # type: ignore[no-any-return]


def oracle(obs: Observation | Mapping[str, Any]) -> dict[str, Any]:
    """The oracle's next action, from the task and turn an observation names."""
    meta = _metadata(obs)
    steps = _plan_of(str(meta["task_id"]))
    turn = int(meta["turn"])
    return dict(steps[turn]) if turn < len(steps) else _call("finish", summary="Done.")


def noop(obs: Observation | Mapping[str, Any]) -> dict[str, Any]:
    """The do-nothing baseline: finish at once (scores 0 on every task)."""
    return _call("finish", summary="Nothing to do.")
