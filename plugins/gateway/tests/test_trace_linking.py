"""The linking rule of ``openenv_gateway.trace`` on hand-made turns."""

from __future__ import annotations

from openenv_gateway.trace import EpisodeTrace, TraceError, Turn, link_turn


def _turn(prompt: list[int], completion: list[int], **kw: object) -> Turn:
    return Turn(index=-1, dialect="chat", stream=False, prompt_ids=prompt, completion_ids=completion, **kw)  # type: ignore[arg-type]


def test_exact_prefix_links_and_anything_else_branches_with_drift() -> None:
    trace = EpisodeTrace("e")
    link_turn(trace, _turn([1, 2], [3, 4]))
    link_turn(trace, _turn([1, 2, 3, 4, 5], [6]))          # extends turn 0
    link_turn(trace, _turn([1, 2, 9], [7]))                # rewrote history: new branch
    assert [t.branch for t in trace.turns] == [0, 0, 1]
    assert trace.turns[1].parent_turn == 0
    drift = trace.branches[1].drift
    assert drift is not None and drift.from_branch == 0
    assert (drift.common_prefix, drift.previous_len, drift.tokens_dropped) == (2, 6, 4)
    assert trace.drift_total == 4


def test_a_later_turn_may_extend_an_older_branch() -> None:
    trace = EpisodeTrace("e")
    link_turn(trace, _turn([1], [2]))
    link_turn(trace, _turn([5], [6]))                      # unrelated: branch 1, no common prefix
    link_turn(trace, _turn([1, 2, 3], [4]))                # continues branch 0
    assert [t.branch for t in trace.turns] == [0, 1, 0]
    assert trace.branches[1].drift is not None and trace.branches[1].drift.common_prefix == 0


def test_missing_ids_and_failed_turns_never_join_a_branch_silently() -> None:
    trace = EpisodeTrace("e")
    link_turn(trace, _turn([1], [2]))
    failed = _turn([1, 2, 3], [4], error=TraceError("upstream_disconnected", "broke"))
    link_turn(trace, failed)
    assert failed.branch == -1                              # kept, with its error, in no branch
    link_turn(trace, _turn([1, 2, 3], [5]))                # the retry still links to turn 0
    assert trace.turns[2].branch == 0
    missing = _turn([], [], ids_source="missing")
    link_turn(trace, missing)
    assert missing.branch == 1 and trace.branches[1].drift is None


def test_common_prefix_len_matches_a_token_by_token_count() -> None:
    import random

    from openenv_gateway.trace import common_prefix_len

    rng = random.Random(7)
    for _ in range(500):
        a = [rng.randrange(3) for _ in range(rng.randrange(0, 40))]
        b = a[:rng.randrange(0, len(a) + 1)] + [rng.randrange(3) for _ in range(rng.randrange(0, 10))]
        expected = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        assert common_prefix_len(a, b) == common_prefix_len(b, a) == expected


def test_a_new_branch_measures_drift_against_the_recent_window_and_old_branches_still_extend() -> None:
    from openenv_gateway.trace import DRIFT_WINDOW

    trace = EpisodeTrace("e")
    link_turn(trace, _turn([9, 9, 9], [1]))  # branch 0: the closest to what comes last, but old
    for i in range(DRIFT_WINDOW + 5):  # unrelated conversations, one branch each
        link_turn(trace, _turn([100 + i], [0]))
    link_turn(trace, _turn([9, 9, 8], [2]))
    assert trace.turns[-1].drift is not None and trace.turns[-1].drift.from_branch > 0  # branch 0 is out of the window
    link_turn(trace, _turn([9, 9, 9, 1, 5], [6]))  # an exact extension is found however old the branch
    assert trace.turns[-1].branch == 0 and trace.turns[-1].parent_turn == 0


def _reference_link(turns: list[tuple[list[int], list[int]]]) -> list[tuple[int, int | None, tuple[int, int] | None]]:
    """The linking rule written as plainly as possible (a walk over every branch per turn): for each
    turn, its branch, parent turn and (drift source, common prefix)."""
    from openenv_gateway.trace import DRIFT_WINDOW

    tips: dict[int, tuple[list[int], int]] = {}  # branch -> (tip ids, turn)
    order: list[int] = []  # branches, the most recently extended last
    out: list[tuple[int, int | None, tuple[int, int] | None]] = []
    for number, (prompt, completion) in enumerate(turns):
        linked = next((b for b in reversed(order) if prompt[:len(tips[b][0])] == tips[b][0]), None)
        if linked is not None:
            out.append((linked, tips[linked][1], None))
            order.remove(linked)
        else:
            best: tuple[int, int] | None = None
            for b in list(reversed(order))[:DRIFT_WINDOW]:
                common = next((i for i, (x, y) in enumerate(zip(tips[b][0], prompt, strict=False)) if x != y),
                              min(len(tips[b][0]), len(prompt)))
                if best is None or common > best[1]:
                    best = (b, common)
            linked = len(tips)
            out.append((linked, None, best))
        tips[linked] = (prompt + completion, number)
        order.append(linked)
    return out


def test_linking_matches_a_plain_walk_over_every_branch_on_random_conversations() -> None:
    import random

    rng = random.Random(11)
    for _ in range(60):
        turns: list[tuple[list[int], list[int]]] = []
        for _ in range(rng.randrange(1, 120)):
            if turns and rng.random() < 0.6:  # continue some earlier turn, maybe with a rewrite
                prompt, completion = rng.choice(turns)
                history = prompt + completion
                if rng.random() < 0.3:
                    history = history[:rng.randrange(len(history) + 1)]
                turns.append((history + [rng.randrange(3) for _ in range(rng.randrange(3))],
                              [rng.randrange(3) for _ in range(rng.randrange(1, 3))]))
            else:
                turns.append(([rng.randrange(3) for _ in range(rng.randrange(4))], [rng.randrange(3)]))
        trace = EpisodeTrace("e")
        for prompt, completion in turns:
            link_turn(trace, _turn(list(prompt), list(completion)))
        got = [(t.branch, t.parent_turn,
                None if t.drift is None else (t.drift.from_branch, t.drift.common_prefix)) for t in trace.turns]
        assert got == _reference_link(turns)


def test_a_trace_whose_branches_changed_outside_link_turn_is_indexed_again() -> None:
    trace = EpisodeTrace("e")
    link_turn(trace, _turn([1], [2]))
    trace.turns.append(_turn([7], [8]))  # a hand-built trace: a second branch made directly
    trace.turns[-1].index, trace.turns[-1].branch = 1, 1
    from openenv_gateway.trace import Branch

    trace.branches.append(Branch(1, [1]))
    link_turn(trace, _turn([7, 8, 9], [0]))
    assert trace.turns[-1].branch == 1 and trace.turns[-1].parent_turn == 1
