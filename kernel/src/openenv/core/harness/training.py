"""Validated token captures (upstream's ``TrainingTurn`` / ``TrainingTrace``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["TrainingTrace", "TrainingTurn"]


class TrainingTurn(BaseModel):
    """One engine call; ``loss_mask`` covers prompt plus completion, logprobs align with the completion."""

    model_config = ConfigDict(strict=True, extra="forbid")

    node_id: str = Field(min_length=1)
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    per_token_logps: list[float]
    loss_mask: list[int]
    request: dict[str, Any] = Field(default_factory=dict)
    response: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _aligned(self) -> TrainingTurn:
        if len(self.per_token_logps) != len(self.completion_token_ids):
            raise ValueError(f"per_token_logps has {len(self.per_token_logps)} entries for "
                             f"{len(self.completion_token_ids)} completion tokens; they must align.")
        total = len(self.prompt_token_ids) + len(self.completion_token_ids)
        if len(self.loss_mask) != total:
            raise ValueError(f"loss_mask has {len(self.loss_mask)} entries; it must cover prompt + completion "
                             f"({total} tokens).")
        if any(m not in (0, 1) for m in self.loss_mask):
            raise ValueError("loss_mask entries must be 0 or 1.")
        return self


class TrainingTrace(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    schema_version: Literal[1] = 1
    turns: list[TrainingTurn]

    @model_validator(mode="after")
    def _unique(self) -> TrainingTrace:
        ids = [t.node_id for t in self.turns]
        if len(set(ids)) != len(ids):
            raise ValueError("training trace contains duplicate node_ids")
        return self

    @classmethod
    def from_entries(cls, entries: list[dict[str, Any]]) -> TrainingTrace:
        return cls(turns=[TrainingTurn(
            node_id=e["metadata"]["node_id"], prompt_token_ids=e["prompt_token_ids"],
            completion_token_ids=e["completion_token_ids"], per_token_logps=e["per_token_logps"],
            loss_mask=e["loss_mask"], request=e.get("request", {}), response=e.get("response", {}),
            metadata=e.get("metadata", {})) for e in entries])

    def to_trace_entries(self) -> list[dict[str, Any]]:
        return [{**t.model_dump(exclude={"node_id"}), "metadata": {**t.metadata, "node_id": t.node_id}}
                for t in self.turns]
