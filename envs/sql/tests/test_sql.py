"""The SQL env: scoring, ordering, read-only database, timeouts, errors, seeding, README, a served run."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import ExecutionError, ValidationError
from openenv.testing import EnvContract, check_registered, readme_snippets, run_cli, run_snippet
from openenv_env_sql import SqlAction, SqlEnv
from openenv_env_sql.policy import solve
from openenv_env_sql.tasks import TASKS

README = Path(__file__).resolve().parents[1] / "README.md"



def ask(env: SqlEnv, query: str):
    return env.step(SqlAction(query=query))


@pytest.mark.parametrize("task", [t.id for t in TASKS])
def test_the_oracle_solves_every_task_in_one_attempt(task: str) -> None:
    env = SqlEnv()
    obs = env.reset(task=task)
    assert obs.attempts_left == 3 and obs.correct is None and "CREATE TABLE" in obs.schema_sql
    obs = ask(env, solve(obs))
    assert obs.reward == 1.0 and obs.done and obs.correct and obs.row_count >= 1


def test_row_order_is_ignored_unless_the_task_asks_for_it() -> None:
    env = SqlEnv()
    env.reset(task="shop_new_york")
    obs = ask(env, "SELECT name AS who FROM customers WHERE city = 'New York' ORDER BY name DESC")
    assert obs.reward == 1.0 and obs.columns == ["who"]
    env.reset(task="shop_hardware_by_price")
    obs = ask(env, "SELECT name, price FROM products WHERE category = 'hardware' ORDER BY price ASC")
    assert obs.reward == 0.0 and not obs.done and "order counts" in obs.feedback
    obs = ask(env, "SELECT name, price FROM products WHERE category = 'hardware' ORDER BY price DESC")
    assert obs.reward == 1.0 and obs.done
    # Duplicates count: a multiset, not a set.
    env.reset(task="shop_new_york")
    obs = ask(env, "SELECT name FROM customers WHERE city = 'New York' UNION ALL SELECT 'Grace'")
    assert obs.reward == 0.0


def test_the_last_attempt_counts_and_then_the_episode_ends() -> None:
    env = SqlEnv(max_attempts=2)
    env.reset(task="shop_order_count")
    obs = ask(env, "SELECT 7")
    assert obs.reward == 0.0 and not obs.done and obs.attempts_left == 1 and obs.rows == [[7]]
    obs = ask(env, "SELECT 9")
    assert obs.reward == 0.0 and obs.done and obs.attempts_left == 0
    with pytest.raises(ExecutionError, match="reset"):
        ask(env, "SELECT COUNT(*) FROM orders")
    with pytest.raises(ExecutionError, match="reset"):
        ask(SqlEnv(), "SELECT 1")


@pytest.mark.parametrize("query", [
    "DELETE FROM customers", "INSERT INTO customers VALUES (9, 'x', 'y')", "DROP TABLE orders",
    "UPDATE products SET price = 0", "CREATE TABLE t (x)", "ATTACH DATABASE ':memory:' AS other",
    "PRAGMA query_only = OFF", "BEGIN", "CREATE TEMP TABLE t AS SELECT 1",
])
def test_the_database_is_read_only(query: str) -> None:
    env = SqlEnv(max_attempts=5)
    env.reset(task="shop_order_count")
    obs = ask(env, query)
    assert obs.error and obs.reward == 0.0 and "SQL error" in obs.feedback
    obs = ask(env, "SELECT COUNT(*) FROM orders")
    assert obs.reward == 1.0  # nothing changed


def test_sql_errors_are_feedback_not_crashes() -> None:
    env = SqlEnv(max_attempts=5)
    env.reset(task="shop_new_york")
    assert "syntax error" in (ask(env, "SELEC name FROM customers").error or "")
    assert "no such table" in (ask(env, "SELECT * FROM nope").error or "")
    assert "one statement" in (ask(env, "SELECT 1; SELECT 2").error or "")
    with pytest.raises(ValueError):
        SqlAction.model_validate({"query": ""})


def test_a_slow_query_is_interrupted() -> None:
    env = SqlEnv(timeout_s=0.2)
    env.reset(task="shop_order_count")
    obs = ask(env, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n")
    assert obs.error and "time limit" in obs.error and not obs.done
    assert ask(env, "SELECT COUNT(*) FROM orders").reward == 1.0


def test_results_are_bounded_in_rows_and_bytes() -> None:
    env = SqlEnv(max_attempts=5)
    env.reset(task="shop_order_count")
    assert "too big" in (ask(env, "SELECT randomblob(10000000)").error or "")
    assert "more than 1000 rows" in (ask(env, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                                              "LIMIT 5000) SELECT i FROM n").error or "")
    assert "larger than" in (ask(env, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 100) "
                                      "SELECT randomblob(90000) FROM n").error or "")
    assert ask(env, "SELECT COUNT(*) FROM orders").reward == 1.0


def test_each_episode_gets_a_fresh_database() -> None:
    env = SqlEnv()
    env.reset(task="shop_order_count")
    db = env._db
    env.reset(task="shop_order_count")
    assert env._db is not db and db is not None
    with pytest.raises(Exception, match="closed"):
        db.query("SELECT 1")


def test_seeded_reset_picks_the_same_task_and_unknown_tasks_are_refused() -> None:
    env = SqlEnv()
    assert env.reset(seed=3).task_id == env.reset(seed=3).task_id
    assert len({env.reset(seed=s).task_id for s in range(30)}) > 3
    with pytest.raises(ValidationError, match="Did you mean 'shop_new_york'"):
        env.reset(task="shop_newyork")
    with pytest.raises(ValidationError, match="unknown reset option"):
        env.reset(tsk="x")


def test_readme_example_runs() -> None:
    block = readme_snippets(README)[0]
    done = run_snippet(block, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[1].startswith("not authorized") and lines[-1] == "1.0 True"


@pytest.mark.requires_plugins("provider-local", "transport-ws")
def test_served_by_openenv_run(tmp_path: Path) -> None:
    done = run_cli("run", "sql", "--episodes", "2", "--seed", "1", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("  step")]
    assert len(steps) == 6  # random words are SQL errors: 3 attempts each
    assert all("reward 0 " in line and '"feedback":"SQL error: ' in line for line in steps)


def test_rubrics_score_attempts_and_are_registered() -> None:
    from openenv.plugins import PluginManager
    from openenv_env_sql import plugin
    from openenv_env_sql.rubrics import ExactResult, RowOverlap

    env = SqlEnv(rubric=RowOverlap(), max_attempts=3)
    env.reset(task="shop_new_york")  # reference: Grace, Barbara
    obs = ask(env, "SELECT name FROM customers WHERE city IN ('New York', 'London')")
    assert obs.reward == pytest.approx(2 / 3) and not obs.done and obs.correct is False
    obs = ask(env, "SELECT name FROM customers WHERE city = 'New York'")
    assert obs.reward == 1.0 and obs.done
    env.reset(task="shop_hardware_by_price")
    assert ask(env, "SELECT name, price FROM products WHERE category = 'hardware'").reward == 0.5
    assert isinstance(SqlEnv().rubric, ExactResult)
    pm = PluginManager(entry_points=[], strict=True)
    pm.register(plugin, name="sql")
    assert pm.catalog.envs.get("sql").load() is SqlEnv
    assert pm.catalog.rubrics.get("sql_overlap").load() is RowOverlap
    assert pm.catalog.rubrics.get("sql_exact").load() is ExactResult


def test_keeps_the_kit_env_contract() -> None:  # served too, when a client transport is installed
    assert "check_concurrent_sessions" in EnvContract(SqlEnv).run()  # run() raises on a broken check


async def test_contract_plugin_manifest_and_independent_sessions() -> None:
    from openenv.sessions import SessionManager
    from openenv_env_sql import SqlEnv, plugin

    entry, manifest = check_registered(plugin, "sql", "openenv_env_sql.env:SqlEnv")
    assert entry.load() is SqlEnv and entry.description
    assert manifest.description and manifest.tags
    assert manifest.reward_range is not None and len(manifest.reward_range) == 2 and "resources" in manifest.model_extra
    manager = SessionManager(SqlEnv, env_name="sql", max_sessions=2)
    a, b = await manager.open(), await manager.open()
    try:
        await manager.reset(a, {"seed": 1, "task_id": "shop_order_count"})
        await manager.reset(b, {"seed": 1, "task_id": "shop_order_count"})
        await manager.step(a, {"query": "SELECT 1"})
        state_a, state_b = await manager.state(a), await manager.state(b)
        assert state_a["step_count"] == 1 and state_b["step_count"] == 0
        assert state_a["attempts"] != state_b["attempts"]
    finally:
        await manager.shutdown()


@pytest.mark.parametrize("max_attempts", ["x", 0, -1, 1.5, True])
def test_a_bad_max_attempts_is_a_validation_error_naming_the_fix(max_attempts: object) -> None:
    env = SqlEnv()
    with pytest.raises(ValidationError, match=r"max_attempts must be a whole number of at least 1 \(e\.g\. "
                                              rf"max_attempts=3\), got {max_attempts!r}"):
        env.reset(seed=0, max_attempts=max_attempts)
    assert env.reset(seed=0, max_attempts=1).attempts_left == 1
