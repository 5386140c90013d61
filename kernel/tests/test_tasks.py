"""The task contract (``openenv.tasks``): sources, their checks, and how envs declare them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.manifest import ManifestError, parse_manifest
from openenv.tasks import (
    InlineTasks,
    NoTasksError,
    SeedTasks,
    Split,
    Task,
    TaskError,
    TaskFile,
    UnknownTaskError,
    UpstreamTasks,
    tasks_from_manifest,
    tasks_of,
)
from openenv.types import Action, Observation, State


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


ROWS = [
    {"id": "add-1", "split": "train", "prompt": "1+1", "answer": "2"},
    {"id": "add-2", "split": "train", "prompt": "2+2", "answer": "4"},
    {"id": "mul-1", "split": "test", "prompt": "3*3", "answer": "9", "seed": 7},
    {"id": "mul-2", "split": "dev", "prompt": "2*5", "answer": "10"},
]


# -- TaskFile -------------------------------------------------------------------------------------

def test_jsonl_file_lists_splits_and_tasks(tmp_path: Path) -> None:
    src = TaskFile(write_jsonl(tmp_path / "tasks.jsonl", ROWS), split_types={"dev": "validation"})
    assert src.splits() == [Split(name="train", type="train", num_tasks=2),
                            Split(name="test", type="test", num_tasks=1),
                            Split(name="dev", type="validation", num_tasks=1)]
    assert src.num_tasks("train") == 2
    assert src.task_at("test", 0) == Task(id="mul-1", split="test", seed=7,
                                          data={"prompt": "3*3", "answer": "9"})
    assert [t.id for t in src.task_range("train")] == ["add-1", "add-2"]
    assert [t.id for t in src.task_range("train", 1)] == ["add-2"]
    assert src.task_range("train", 5, 9) == []
    assert src.get("add-2").data == {"prompt": "2+2", "answer": "4"}
    with pytest.raises(IndexError, match="out of range"):
        src.task_at("train", 2)


def test_parquet_file(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "tasks.parquet"
    # A column holds a value in every row: rows without a seed have a null one.
    pq.write_table(pa.Table.from_pylist([{"seed": None, **r} for r in ROWS[:3]]), path)
    src = TaskFile(path)
    assert src.num_tasks("train") == 2
    assert src.get("mul-1").seed == 7


@pytest.mark.parametrize("second", [
    {"id": "add-1", "split": "train", "prompt": "x"},
])
def test_duplicate_id_names_file_row_and_id(tmp_path: Path, second: dict[str, Any]) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], second])
    with pytest.raises(TaskError, match="duplicate task id") as info:
        TaskFile(path).validate()
    assert (info.value.file, info.value.row, info.value.task_id) == (str(path), 2, "add-1")
    assert "row 2" in str(info.value) and str(path) in str(info.value)


def test_id_in_two_splits_is_refused(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], {"id": "add-1", "split": "test"}])
    with pytest.raises(TaskError, match="both split 'train' and split 'test'") as info:
        TaskFile(path).validate()
    assert info.value.row == 2


@pytest.mark.parametrize(("row", "message"), [
    ("{not json", "not valid JSON"),
    ('["a list"]', "must be an object"),
    ({"split": "train"}, "no usable 'id'"),
    ({"id": "x"}, "no usable 'split'"),
    ({"id": "x", "split": "train", "seed": -1}, "non-negative integer"),
    ({"id": "x", "split": "train", "seed": "3"}, "non-negative integer"),
])
def test_malformed_row_names_the_row(tmp_path: Path, row: Any, message: str) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], "", row])
    with pytest.raises(TaskError, match=message) as info:
        TaskFile(path).validate()
    assert info.value.row == 3  # the blank line counts: rows are line numbers


def test_missing_file_and_unknown_suffix(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "tasks.jsonl", ROWS)
    with pytest.raises(TaskError, match=r"not found. Did you mean 'tasks.jsonl'"):
        TaskFile(tmp_path / "task.jsonl").validate()
    (tmp_path / "tasks.csv").write_text("id,split\n")
    with pytest.raises(TaskError, match=r"unsupported task file type '.csv'"):
        TaskFile(tmp_path / "tasks.csv").validate()


def test_bad_split_types(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", ROWS)
    with pytest.raises(TaskError, match=r"type 'testing'.*Did you mean 'test'"):
        TaskFile(path, split_types={"dev": "testing"}).validate()
    with pytest.raises(TaskError, match=r"no task has.*Did you mean 'dev'"):
        TaskFile(path, split_types={"deev": "validation"}).validate()


def test_file_is_read_lazily(tmp_path: Path) -> None:
    src = TaskFile(tmp_path / "later.jsonl")  # declaring it in a class body must not read it
    write_jsonl(tmp_path / "later.jsonl", ROWS)
    assert src.num_tasks("dev") == 1


def test_unknown_id_and_split_suggest(tmp_path: Path) -> None:
    src = TaskFile(write_jsonl(tmp_path / "t.jsonl", ROWS))
    with pytest.raises(UnknownTaskError, match=r"Unknown task id 'add-3'. Did you mean 'add-2'") as info:
        src.get("add-3")
    assert info.value.code == "VALIDATION_ERROR"
    assert info.value.data["splits"] == ["train", "test", "dev"]
    with pytest.raises(UnknownTaskError, match=r"Unknown split 'tset'. Did you mean 'test'"):
        src.num_tasks("tset")


# -- InlineTasks ----------------------------------------------------------------------------------

def test_inline_tasks_from_models_and_dicts() -> None:
    src = InlineTasks([Task(id="a", split="train", data={"q": 1}), {"id": "b", "split": "test", "q": 2}])
    assert src.get("a").data == {"q": 1}
    assert src.get("b").data == {"q": 2}
    assert [s.name for s in src.splits()] == ["train", "test"]
    with pytest.raises(TaskError, match="both split"):
        InlineTasks([{"id": "a", "split": "train"}, {"id": "a", "split": "test"}]).validate()


def test_task_is_frozen() -> None:
    task = Task(id="a", split="train")
    with pytest.raises(Exception, match="frozen"):
        task.id = "b"  # type: ignore[misc]


# -- SeedTasks ------------------------------------------------------------------------------------

def test_seed_tasks() -> None:
    src = SeedTasks({"train": range(0, 10_000), "test": [1_000_000, 1_000_500]}, config={"size": 4})
    assert src.splits() == [Split(name="train", type="train", num_tasks=10_000),
                            Split(name="test", type="test", num_tasks=500)]
    task = src.task_at("test", 3)
    assert task == Task(id="test-1000003", split="test", seed=1_000_003, data={"size": 4})
    assert src.get("test-1000003") == task
    assert [t.seed for t in src.task_range("train", 9_998)] == [9_998, 9_999]
    with pytest.raises(UnknownTaskError, match="Did you mean 'test-1000499'"):
        src.get("test-1000500")
    with pytest.raises(UnknownTaskError, match="Unknown task id"):
        src.get("nonsense")


def test_seed_ranges_must_be_disjoint() -> None:
    with pytest.raises(TaskError, match="'train' \\[0, 100\\) and 'test' \\[50, 60\\) share seeds"):
        SeedTasks({"train": range(0, 100), "test": range(50, 60)})
    with pytest.raises(TaskError, match="empty"):
        SeedTasks({"train": [5, 5]})
    with pytest.raises(TaskError, match=">= 0"):
        SeedTasks({"train": [-5, 5]})


# -- manifest and tasks_of ------------------------------------------------------------------------

def test_manifest_tasks_entry(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "tasks.jsonl", ROWS)
    m = parse_manifest({"name": "x", "tasks": {"file": "tasks.jsonl", "split_types": {"dev": "validation"}}})
    src = tasks_from_manifest(m, tmp_path)
    assert isinstance(src, TaskFile) and src.num_tasks("dev") == 1
    m = parse_manifest({"name": "x", "tasks": {"seeds": {"train": [0, 10], "test": [100, 105]},
                                                "config": {"level": 2}}})
    src = tasks_from_manifest(m, tmp_path)
    assert src is not None and src.get("test-104").data == {"level": 2}
    with pytest.raises(ManifestError, match="exactly one of 'file'"):
        parse_manifest({"name": "x", "tasks": {}})
    with pytest.raises(ManifestError, match=r"tasks.flie"):
        parse_manifest({"name": "x", "tasks": {"flie": "t.jsonl"}})


class Msg(Action):
    text: str = ""


class TaskEnv(Environment[Msg, Observation, State]):
    tasks = InlineTasks([{"id": "a", "split": "train"}])

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: Msg, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation()


class Upstreamish(Environment[Msg, Observation, State]):
    """An env written for upstream 0.10's TaskProvider methods."""

    built = 0

    def __init__(self) -> None:
        type(self).built += 1

    def list_splits(self) -> list[Any]:
        return ["train", {"name": "holdout", "type": "test"}]

    def list_tasks(self, split: str) -> list[Any]:
        return [self.get_task(split, i) for i in range(self.num_tasks(split))]

    def num_tasks(self, split: str) -> int:
        return 3 if split == "train" else 1

    def get_task(self, split: str, index: int) -> Any:
        if index >= self.num_tasks(split):
            raise IndexError(index)
        return {"id": f"{split}/{index}", "question": index}

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]:
        return [self.get_task(split, i) for i in range(self.num_tasks(split))[slice(start, stop)]]

    def reset(self, seed: int | None = None, episode_id: str | None = None, split: str | None = None,
              index: int | None = None) -> Observation:
        return Observation(metadata={"picked": [split, index]})

    def step(self, action: Msg, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation()


def test_tasks_of_class_attribute_and_none() -> None:
    assert tasks_of(TaskEnv) is TaskEnv.tasks

    class Plain(Environment[Msg, Observation, State]):
        def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
            return Observation()

    assert tasks_of(Plain) is None
    assert tasks_of(None) is None


def test_tasks_of_rejects_a_non_source() -> None:
    class Wrong(TaskEnv):
        tasks = ["a", "b"]  # type: ignore[assignment]

    with pytest.raises(TaskError, match="not a TaskSource"):
        tasks_of(Wrong)


def test_upstream_methods_are_adapted_with_one_env() -> None:
    Upstreamish.built = 0
    src = tasks_of(Upstreamish)
    assert isinstance(src, UpstreamTasks)
    assert src.splits() == [Split(name="train", type="train", num_tasks=3),
                            Split(name="holdout", type="test", num_tasks=1)]
    assert src.task_at("train", 2) == Task(id="train/2", split="train", data={"id": "train/2", "question": 2,
                                                                            "index": 2})
    assert [t.id for t in src.task_range("train", 1)] == ["train/1", "train/2"]
    assert src.get("holdout/0").split == "holdout"
    with pytest.raises(UnknownTaskError, match="Did you mean 'train/1'"):
        src.get("train/11")
    assert Upstreamish.built == 1  # listing never builds an env per call


def test_no_tasks_error_says_how_to_declare() -> None:
    from openenv.tasks import no_tasks_error

    err = no_tasks_error("echo", "list its tasks")
    assert isinstance(err, NoTasksError) and isinstance(err, ValidationError)
    assert err.data["reason"] == "no_tasks"
    assert "tasks: {file: tasks.jsonl}" in err.message and "TaskFile" in err.message


def test_merge_task_and_checked_task() -> None:
    from openenv.errors import ValidationError
    from openenv.tasks import Task, checked_task, merge_task

    task = Task(id="t-1", split="train", seed=7, data={"size": 5})
    assert merge_task(None, 3, {"a": 1}) == (3, {"a": 1})
    assert merge_task(task, 3, {"a": 1, "size": 2}) == (7, {"a": 1, "size": 5})
    assert merge_task(Task(id="t-2", split="train", data={}), 3, {}) == (3, {})
    assert checked_task(task) is task
    with pytest.raises(ValidationError, match=r"task must be an openenv\.tasks\.Task, got dict; pass task_id"):
        checked_task({"id": "t-1"}, "pass task_id")


def test_draw_picks_a_train_task_by_seed() -> None:
    from openenv.tasks import InlineTasks

    source = InlineTasks([{"id": f"tr-{i}", "split": "train"} for i in range(5)] +
                         [{"id": "te-0", "split": "test"}])
    assert source.draw(3) == source.draw(3) and source.draw(3).split == "train"
    assert {source.draw(s).id for s in range(40)} == {f"tr-{i}" for i in range(5)}
    assert InlineTasks([{"id": "only", "split": "dev"}]).draw(None).id == "only"
