"""The office tasks: generated deterministically, disjoint splits, an oracle at 1.0 and a no-op at 0."""

from __future__ import annotations

from typing import Any

from openenv.tasks import tasks_of
from openenv_env_office.checks import grade, snapshot
from openenv_env_office.env import OfficeEnv
from openenv_env_office.oracle import noop, oracle, plan
from openenv_env_office.tasks import TASKS, TEMPLATES, build_db, generate
from openenv_env_office.user import ScriptedUser


def play(env: OfficeEnv, policy: Any, **reset: Any) -> tuple[float, Any]:
    obs = env.reset(**reset)
    total = 0.0
    for _ in range(env.max_steps):  # bounded by the env's own step limit
        obs = env.step(env.action_type.model_validate(policy(obs.model_dump())))
        assert getattr(obs, "error", None) is None, obs
        total += obs.reward or 0.0
        if obs.done:
            break
    return total, obs


def test_at_least_sixty_tasks_generated_the_same_way_every_time() -> None:
    assert len(TASKS) == 72 and len({t.id for t in TASKS}) == 72
    assert generate() == TASKS
    assert {t.template for t in TASKS} == set(TEMPLATES)
    assert sum(t.followup is not None for t in TASKS) == 24  # two multi-turn templates


def test_the_splits_are_disjoint_by_template_instance() -> None:
    source = tasks_of(OfficeEnv)
    assert source is not None
    source.validate()
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 54, "test": 18}
    train = {t.id for t in source.task_range("train")}
    test = {t.id for t in source.task_range("test")}
    assert not train & test and "schedule_meeting-10" in test and "schedule_meeting-3" in train


def test_the_same_task_seeds_the_same_rows_and_different_tasks_differ() -> None:
    a, _ = build_db(TASKS[5])
    b, _ = build_db(TASKS[5])
    c, _ = build_db(TASKS[6])
    try:
        assert snapshot(a) == snapshot(b) and a.emails() == b.emails()
        assert snapshot(a) != snapshot(c)
    finally:
        for db in (a, b, c):
            db.close()


def test_the_oracle_scores_one_and_the_noop_zero_on_every_task() -> None:
    env = OfficeEnv(user=ScriptedUser())
    try:
        for task in tasks_of(OfficeEnv).iter_tasks():  # type: ignore[union-attr]
            total, last = play(env, oracle, task=task)
            assert total == 1.0 and last.done, (task.id, last)
            assert set(last.result["structured_content"]["checks"].values()) == {1.0}
            total, last = play(env, noop, task=task)
            assert total == 0.0 and last.done, task.id
            assert 0.0 in last.result["structured_content"]["checks"].values()
    finally:
        env.close()


def test_the_oracle_asks_for_what_the_request_leaves_out_and_gets_it() -> None:
    user = ScriptedUser()
    for task in TASKS:
        for step in plan(task):
            if step["tool_name"] == "ask_user":
                answer = user.answer(task, step["arguments"]["question"])
                assert "I don't know" not in answer, (task.id, answer)


def test_the_grader_reads_the_database_a_wrong_time_or_a_side_effect_fails() -> None:
    task = next(t for t in TASKS if t.template == "schedule_meeting")
    steps = plan(task)
    create = next(s for s in steps if s["tool_name"] == "create_event")
    db, ids = build_db(task)
    try:
        base = snapshot(db)
        env = OfficeEnv(user=ScriptedUser())
        env._db, env._task = db, task  # the tools act on this database
        args = dict(create["arguments"], start=create["arguments"]["start"].replace(":00", ":30", 1))
        env.create_event(**{**args, "end": args["start"][:11] + "23:00"})
        env.send_email(**next(s for s in steps if s["tool_name"] == "send_email")["arguments"])
        checks = grade(task, db, ids, base)
        assert checks["event_created"] == 0.0 and checks["email_with_time"] == 1.0
        db.conn.execute("DELETE FROM events")
        env.create_event(**create["arguments"])
        checks = grade(task, db, ids, base)
        assert checks["event_created"] == 1.0 and checks["other_events_unchanged"] == 0.0
    finally:
        db.close()


def test_a_multi_turn_task_adds_its_follow_up_once_the_first_part_is_done() -> None:
    task = next(t for t in tasks_of(OfficeEnv).iter_tasks()  # type: ignore[union-attr]
                if t.data["template"] == "add_contact")
    env = OfficeEnv(user=ScriptedUser())
    try:
        steps = plan(next(t for t in TASKS if t.id == task.id))
        env.reset(task=task)
        premature = env.step(env.action_type.model_validate(steps[-1]))  # finish before anything was done
        assert premature.done and premature.reward == 0.0
        env.reset(task=task)
        for step in steps[:3]:
            obs = env.step(env.action_type.model_validate(step))
        assert not obs.done and obs.reward == 0.0 and env.state.part == 2
        assert obs.result["structured_content"]["user"] == task.data["followup"]
        obs = env.step(env.action_type.model_validate(steps[2]))  # finish again without the follow-up's work
        assert obs.done and obs.reward == 0.0
        assert obs.result["structured_content"]["checks"]["followup_todo_added"] == 0.0
    finally:
        env.close()
