"""``openenv validate``'s ``tasks`` check: declared tasks load, and each split's first and last
task resets the env; a bad file or a task the env cannot play fails naming it; no tasks is n/a."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from openenv.cli._validate_core import Check
from openenv.cli.validate_cmd import validate_target

ENV = '''
from __future__ import annotations
import uuid
from typing import Any
from pydantic import Field
from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.types import Action, Observation, State

class CountAction(Action):
    amount: int = Field(ge=1, le=3)

class CountObservation(Observation):
    value: int
    target: int

class CountEnv(Environment[CountAction, CountObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def __init__(self) -> None:
        self._state = State(episode_id="x", step_count=0)
        self.value, self.target = 0, 5

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Any = None,
              **kw: Any) -> CountObservation:
        self.target = 5 if task is None else task.data["target"]
        if not 1 <= self.target <= 9:
            raise ValidationError(f"target must be 1..9, got {self.target}")
        self.value = 0
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CountObservation(value=0, target=self.target, reward=0.0, done=False)

    def step(self, action: CountAction, timeout_s: float | None = None, **kw: Any) -> CountObservation:
        self._state.step_count += 1
        self.value += action.amount
        done = self.value >= self.target
        return CountObservation(value=self.value, target=self.target, reward=float(self.value == self.target),
                                done=done)

    @property
    def state(self) -> State:
        return self._state
'''

GOOD_ROWS = [{"id": f"t{n}", "split": "train" if n < 6 else "test", "target": n} for n in range(1, 9)]


def _env(root: Path, name: str, rows: list[dict[str, object]] | None) -> Path:
    package = root / name / "src" / f"validate_tasks_{name}"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "env.py").write_text(textwrap.dedent(ENV), encoding="utf-8")
    manifest = (f'spec_version: 1\nname: {name}\nenv: "validate_tasks_{name}.env:CountEnv"\n'
                "reward_range: [0.0, 1.0]\nmax_episode_steps: 20\n")
    if rows is not None:
        manifest += "tasks:\n  file: tasks.jsonl\n"
        (package / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (package / "openenv.yaml").write_text(manifest, encoding="utf-8")
    return root / name


def _tasks_check(folder: Path) -> Check:
    report = validate_target(str(folder), episodes=1)
    return next(c for c in report.checks if c.name == "tasks")


def test_loadable_playable_tasks_pass_and_the_detail_lists_the_splits(tmp_path: Path) -> None:
    check = _tasks_check(_env(tmp_path, "good", GOOD_ROWS))
    assert check.status == "pass", check
    assert "train (train, 5 tasks)" in check.detail and "test (test, 3 tasks)" in check.detail


@pytest.mark.parametrize(("rows", "says"), [
    (GOOD_ROWS + [{"id": "t2", "split": "train", "target": 3}], "row 9"),
    (GOOD_ROWS + [{"id": "t2", "split": "test", "target": 3}], "both split"),
    (GOOD_ROWS + [{"split": "test", "target": 3}], "no usable 'id'"),
    (GOOD_ROWS + [{"id": "far", "split": "test", "target": 99}], "task 'far' (split test) does not reset"),
])
def test_a_bad_task_fails_the_check_naming_it_and_the_fix(tmp_path: Path, rows: list[dict[str, object]],
                                                          says: str) -> None:
    check = _tasks_check(_env(tmp_path, "bad", rows))
    assert check.status == "fail" and says in check.detail and check.fix, check


def test_an_env_without_tasks_is_not_applicable_and_says_how_to_declare_them(tmp_path: Path) -> None:
    check = _tasks_check(_env(tmp_path, "none", None))
    assert check.status == "n/a" and "declares no tasks" in check.detail and "tasks:" in check.detail
