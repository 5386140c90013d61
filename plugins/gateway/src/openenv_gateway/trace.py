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

from collections.abc import Sequence
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
    #: ``link_turn``'s index of the branch tips: see ``_TipIndex``.
    _tips: _TipIndex | None = field(default=None, init=False, repr=False, compare=False)

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


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading ids ``a`` and ``b`` share (a binary search over C-level slice comparisons:
    a Python loop per token made linking a long turn cost milliseconds)."""
    if type(a) is not type(b):  # a list's slice never equals a tuple's
        a, b = list(a), list(b)
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


class _TipIndex:
    """The tips of an episode's branches, by length and content, so that linking a turn costs a few
    dict lookups instead of a walk over every branch (an agent that starts many conversations in one
    episode has thousands of branches; the walk made each model call slower than the one before).

    ``by_len[L][ids]`` holds the branches whose tip's ``prompt_ids + completion_ids`` is ``ids`` (of
    length L), most recently extended last. ``tip_of`` is every linkable branch's tip, the most
    recently extended last: the drift window reads its end; ``stamp`` orders branches found under
    different lengths. ``branches`` is how many of the trace's branches are indexed; a trace whose
    branches changed behind ``link_turn``'s back is indexed again.
    """

    def __init__(self) -> None:
        self.by_len: dict[int, dict[tuple[int, ...], dict[int, None]]] = {}
        self.tip_of: dict[int, tuple[int, ...]] = {}
        self.stamp: dict[int, int] = {}
        self.branches = self.clock = 0

    @classmethod
    def of(cls, trace: EpisodeTrace) -> _TipIndex:
        index = trace._tips
        if index is None or index.branches != len(trace.branches):
            index = cls()
            for branch in trace.branches:
                tip = trace.turns[branch.turns[-1]]
                if tip.ids_source != "missing":
                    index.put(branch.index, tuple(tip.full_ids))
            index.branches = len(trace.branches)
            trace._tips = index
        return index

    def put(self, branch: int, ids: tuple[int, ...]) -> None:
        old = self.tip_of.pop(branch, None)
        if old is not None:
            same = self.by_len[len(old)][old]
            del same[branch]
            if not same:
                del self.by_len[len(old)][old]
        self.tip_of[branch] = ids
        self.clock += 1
        self.stamp[branch] = self.clock
        self.by_len.setdefault(len(ids), {}).setdefault(ids, {})[branch] = None

    def extended_by(self, prompt: tuple[int, ...]) -> int | None:
        """The most recently extended branch whose tip is a prefix of ``prompt`` (None if none is)."""
        best: int | None = None
        for length, tips in self.by_len.items():
            if length <= len(prompt):
                same = tips.get(prompt[:length])
                if same:
                    found = next(reversed(same))
                    if best is None or self.stamp[found] > self.stamp[best]:
                        best = found
        return best

    def window(self) -> list[tuple[int, tuple[int, ...]]]:
        """The ``DRIFT_WINDOW`` most recent linkable branches, newest first, with their tips."""
        out: list[tuple[int, tuple[int, ...]]] = []
        for branch in reversed(self.tip_of):
            out.append((branch, self.tip_of[branch]))
            if len(out) == DRIFT_WINDOW:
                break
        return out


def link_turn(trace: EpisodeTrace, turn: Turn) -> None:
    """Add ``turn`` (with its ids) to ``trace``: onto the branch whose tip it extends, else a new branch.

    A turn without ids (``ids_source="missing"``) cannot be linked: it gets a branch of its own with
    no drift (there is nothing to measure), so a sample never spans a gap in the data. A failed turn
    (upstream error, broken stream) is kept with its error but joins no branch: the agent will retry
    from the same history, and that retry must still link to the branch the failed call left.
    When several branches' tips are a prefix of the prompt, the most recently extended one is
    extended; a new branch's drift is measured against the closest of the ``DRIFT_WINDOW`` most
    recently extended ones (the newest of those that share as much).
    """
    index = _TipIndex.of(trace)
    turn.index = len(trace.turns)
    trace.turns.append(turn)
    if turn.error is not None and turn.ids_source == "engine":
        return
    if turn.ids_source == "missing":
        branch = Branch(len(trace.branches), [turn.index])
        trace.branches.append(branch)
        index.branches += 1
        turn.branch = branch.index
        return
    prompt = tuple(turn.prompt_ids)
    found = index.extended_by(prompt)
    if found is not None:
        branch = trace.branches[found]
        turn.branch, turn.parent_turn = branch.index, branch.turns[-1]
        branch.turns.append(turn.index)
        index.put(branch.index, prompt + tuple(turn.completion_ids))
        return
    best: tuple[int, int] | None = None  # (common prefix, branch index): the longest, then the newest
    for number, tip in index.window():
        if best is not None and len(tip) <= best[0]:
            continue  # cannot share more than the best so far
        common = common_prefix_len(tip, prompt)
        if best is None or common > best[0]:
            best = (common, number)
    drift = None
    if best is not None:
        common, closest = best
        previous = len(index.tip_of[closest])
        drift = Drift(from_branch=closest, common_prefix=common, tokens_dropped=previous - common,
                      previous_len=previous)
    branch = Branch(len(trace.branches), [turn.index], drift)
    trace.branches.append(branch)
    index.branches += 1
    index.put(branch.index, prompt + tuple(turn.completion_ids))
    turn.branch, turn.drift = branch.index, drift
