"""A small real ORS environment (the ``openreward`` package's own API): sums to answer, a train and
a test split, one ``submit`` tool that grades the answer (reward 1.0 or 0.0) and ends the episode,
and a ``hint`` tool that grants nothing. The fixture of tests/ors/test_import_ors.py."""

from __future__ import annotations

from openreward.environments import Environment, Split, TextBlock, ToolOutput, tool
from pydantic import BaseModel

PAIRS = {"train": [(2, 2), (3, 4), (10, 7)], "test": [(6, 6), (9, 1)]}


class Answer(BaseModel):
    answer: str


class ArithEnv(Environment):
    """What is a+b? Submit the number."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (ORS's signature)
        super().__init__(task_spec, secrets)
        self.attempts = 0

    @classmethod
    def list_splits(cls) -> list[Split]:
        return [Split(name="train", type="train"), Split(name="test", type="test")]

    @classmethod
    def list_tasks(cls, split: str) -> list[dict]:
        return [{"id": f"{split}-sum-{i}", "a": a, "b": b, "answer": str(a + b)}
                for i, (a, b) in enumerate(PAIRS[split])]

    async def get_prompt(self) -> list[TextBlock]:
        return [TextBlock(text=f"What is {self.task_spec['a']}+{self.task_spec['b']}? Call submit with the number.")]

    @tool
    async def submit(self, params: Answer) -> ToolOutput:
        """Submit your answer; the episode ends."""
        self.attempts += 1
        right = params.answer.strip() == self.task_spec["answer"]
        return ToolOutput(blocks=[TextBlock(text="correct" if right else "wrong")],
                          metadata={"attempts": self.attempts}, reward=1.0 if right else 0.0, finished=True)

    @tool
    def hint(self) -> ToolOutput:
        """How many digits the answer has."""
        return ToolOutput(blocks=[TextBlock(text=f"{len(self.task_spec['answer'])} digit(s)")])
