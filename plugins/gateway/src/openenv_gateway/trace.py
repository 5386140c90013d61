"""What the gateway records: turns (one model call each), branches (turns linked by exact token
prefix) and the episode's trace.

The linking rule: turn k+1 continues a branch when the branch's last turn's ``prompt_ids +
completion_ids`` is an exact prefix of turn k+1's ``prompt_ids``. Anything else (the agent
compacted its history, dropped a turn, edited a message, or the chat template re-tokenised an
answer differently from how it was sampled) starts a new branch, and the drift against the branch
it came closest to is measured: the common prefix length and how many of that branch's tokens the
new prompt dropped. Nothing is ever re-tokenised here: ids are the engine's or they are missing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["DRIFT_WINDOW", "Branch", "Drift", "EpisodeTrace", "IdsSource", "Turn", "TraceError", "common_prefix_len",
           "link_turn"]

IdsSource = Literal["engine", "missing"]


@dataclass
class Drift:
    """Why a new branch started: how far its prompt agreed with the closest earlier branch."""

    from_branch: int
    common_prefix: int
    tokens_dropped: int
    previous_len: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TraceError:
    """A structured error recorded in the trace (the agent got the provider's error shape)."""

    code: str
    message: str
    dialect: str = ""
    status: int = 0
    turn: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Turn:
    """One model call: the engine's own prompt and completion ids and per-token logprobs."""

    index: int
    dialect: str
    stream: bool
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    ids_source: IdsSource = "engine"
    finish_reason: str | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    branch: int = -1
    parent_turn: int | None = None
    drift: Drift | None = None
    error: TraceError | None = None
    latency_s: float = 0.0

    @property
    def full_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["drift"] = self.drift.to_dict() if self.drift else None
        out["error"] = self.error.to_dict() if self.error else None
        return out


@dataclass
class Branch:
    """Turns that extend one another by exact token prefix, in order."""

    index: int
    turns: list[int] = field(default_factory=list)
    drift: Drift | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "turns": list(self.turns), "drift": self.drift.to_dict() if self.drift else None}


@dataclass
class EpisodeTrace:
    """Everything captured for one episode; ``close_episode`` returns it."""

    episode_id: str
    meta: dict[str, Any] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    branches: list[Branch] = field(default_factory=list)
    errors: list[TraceError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"episode_id": self.episode_id, "meta": dict(self.meta), "turns": [t.to_dict() for t in self.turns],
                "branches": [b.to_dict() for b in self.branches], "errors": [e.to_dict() for e in self.errors]}

    @property
    def drift_total(self) -> int:
        """Tokens dropped over all branch starts (0 when every turn linked)."""
        return sum(b.drift.tokens_dropped for b in self.branches if b.drift)


#: A new branch's drift is measured against the closest of this many most recent branches: the
#: cost of linking a turn stays bounded for an agent that starts conversation after conversation.
DRIFT_WINDOW = 64


def common_prefix_len(a: list[int], b: list[int]) -> int:
    """How many leading ids ``a`` and ``b`` share (a binary search over C-level slice comparisons:
    a Python loop per token made linking a long turn cost milliseconds)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n - 1  # the answer is in [lo, hi]: a[:lo] == b[:lo], and a[:n] != b[:n]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def link_turn(trace: EpisodeTrace, turn: Turn) -> None:
    """Add ``turn`` (with its ids) to ``trace``: onto the branch whose tip it extends, else a new branch.

    A turn without ids (``ids_source="missing"``) cannot be linked: it gets a branch of its own with
    no drift (there is nothing to measure), so a sample never spans a gap in the data. A failed turn
    (upstream error, broken stream) is kept with its error but joins no branch: the agent will retry
    from the same history, and that retry must still link to the branch the failed call left.
    """
    turn.index = len(trace.turns)
    trace.turns.append(turn)
    if turn.error is not None and turn.ids_source == "engine":
        return
    if turn.ids_source == "missing":
        branch = Branch(len(trace.branches), [turn.index])
        trace.branches.append(branch)
        turn.branch = branch.index
        return
    best: tuple[int, int, Branch] | None = None  # (common prefix, -branch index, branch)
    prompt, n = turn.prompt_ids, len(turn.prompt_ids)
    for seen, branch in enumerate(reversed(trace.branches)):
        tip = trace.turns[branch.turns[-1]]
        if tip.ids_source == "missing":
            continue
        lp, lc = len(tip.prompt_ids), len(tip.completion_ids)
        # (the length first: most tips cannot be a prefix, and are skipped without copying a list)
        if lp + lc <= n and prompt[:lp] == tip.prompt_ids and prompt[lp:lp + lc] == tip.completion_ids:
            branch.turns.append(turn.index)
            turn.branch, turn.parent_turn = branch.index, tip.index
            return
        if seen < DRIFT_WINDOW:
            common = common_prefix_len(tip.full_ids, prompt)
            if best is None or common > best[0]:
                best = (common, -branch.index, branch)
    drift = None
    if best is not None:
        common, _, closest = best
        previous = len(trace.turns[closest.turns[-1]].full_ids)
        drift = Drift(from_branch=closest.index, common_prefix=common, tokens_dropped=previous - common,
                      previous_len=previous)
    branch = Branch(len(trace.branches), [turn.index], drift)
    trace.branches.append(branch)
    turn.branch, turn.drift = branch.index, drift
