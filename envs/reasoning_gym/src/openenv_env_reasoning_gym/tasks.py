"""The reasoning-gym env's declared tasks: a few of its generators, each with its own seeds.

A task is one question: ``(dataset, seed)``, built as ``create_dataset(dataset, seed=seed,
size=1)[0]``, so it depends on nothing but those two. Every dataset has the same seed ranges per
split (``train`` 0..9 999, ``test`` 1 000 000..1 000 499), disjoint by construction; the id is
``"<dataset>/<split>-<seed>"`` (``"chain_sum/test-1000007"``). Tasks of a split interleave the
datasets (index ``i`` is dataset ``i % D``), so the first page of a split shows every dataset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from openenv.errors import did_you_mean
from openenv.tasks import SeedTasks, Split, Task, TaskError, TaskSource, UnknownTaskError

__all__ = ["SPLITS", "TASK_DATASETS", "DatasetSeedTasks"]

#: Generators with cheap, exact verifiers and no optional dependencies.
TASK_DATASETS: tuple[str, ...] = (
    "basic_arithmetic", "chain_sum", "spell_backward", "leg_counting", "letter_counting",
    "number_sorting", "gcd", "word_sorting", "base_conversion", "fraction_simplification",
)
SPLITS: dict[str, range] = {"train": range(0, 10_000), "test": range(1_000_000, 1_000_500)}


class DatasetSeedTasks(TaskSource):
    """``SeedTasks`` per dataset: the same disjoint seed ranges for every dataset in ``datasets``.
    ``Task.seed`` is the seed, ``Task.data`` is ``{"dataset": name}``."""

    def __init__(self, datasets: Sequence[str], splits: Mapping[str, range | Sequence[int]]) -> None:
        if not datasets or len(set(datasets)) != len(datasets) or any("/" in d for d in datasets):
            raise TaskError(f"datasets must be distinct names without '/', got {list(datasets)}",
                            file=self.describe())
        self.datasets = tuple(datasets)
        # The seed ranges, checked disjoint by SeedTasks; its ids are this source's id suffixes.
        self._seeds = SeedTasks(splits, name=self.describe())

    def describe(self) -> str:
        return "reasoning_gym dataset seeds"

    def splits(self) -> list[Split]:
        return [s.model_copy(update={"num_tasks": s.num_tasks * len(self.datasets)}) for s in self._seeds.splits()]

    def num_tasks(self, split: str) -> int:
        return self._seeds.num_tasks(split) * len(self.datasets)

    def task_at(self, split: str, index: int) -> Task:
        total = self.num_tasks(split)
        if not 0 <= index < total:
            raise IndexError(f"Task index {index} is out of range for split '{split}' ({total} tasks: 0..{total - 1}).")
        dataset = self.datasets[index % len(self.datasets)]
        return self._with(dataset, self._seeds.task_at(split, index // len(self.datasets)))

    def get(self, task_id: str) -> Task:
        dataset, sep, rest = task_id.partition("/")
        if not sep or dataset not in self.datasets:
            hint = did_you_mean(dataset, self.datasets)
            names = self._seeds.split_names()
            example = f"{self.datasets[0]}/{self._seeds.task_at(names[0], 0).id}"
            raise UnknownTaskError(
                f"Unknown task id '{task_id}'.{hint} Ids are '<dataset>/<split>-<seed>' with the dataset one of "
                f"{', '.join(self.datasets)}, e.g. '{example}'.",
                data={"task_id": task_id, "splits": names})
        try:
            return self._with(dataset, self._seeds.get(rest))
        except UnknownTaskError as exc:  # name the whole id; the seed ranges come from SeedTasks
            raise UnknownTaskError(f"Unknown task id '{task_id}' (the dataset is known, the rest is not): "
                                   f"{exc.message}", data={**exc.data, "task_id": task_id}) from None

    def validate(self) -> None:
        self._seeds.validate()

    def _with(self, dataset: str, seeded: Task) -> Task:
        return Task(id=f"{dataset}/{seeded.id}", split=seeded.split, seed=seeded.seed, data={"dataset": dataset})
