"""The one composition core (``openenv.rubric_compose``), shared by the rubrics package and the
compatibility layer's containers."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from openenv.rubric_compose import (
    Chain,
    discounted_credit,
    discounted_return,
    fail_fast,
    fold,
    gate,
    weighted_sum,
    weighted_total,
)


async def _later(value: float) -> float:
    await asyncio.sleep(0)
    return value


def test_fold_is_sync_for_sync_scores_and_stops_when_the_step_says() -> None:
    seen: list[float] = []

    def score(v: float) -> float:
        seen.append(v)
        return v

    assert fold([1.0, 2.0, 4.0], score, weighted_sum([0.5, 0.25, 1.0]), 0.0) == 5.0
    values = [0.1, 0.7, 0.3]  # the scored fold and the total of scored values: the same float
    assert weighted_total([0.3, 0.3, 0.4], values) == fold(values, float, weighted_sum([0.3, 0.3, 0.4]), 0.0)
    chain = fold([0.5, 0.0, 0.9], score, fail_fast(lambda _i, v: v == 0.0), Chain[float]())
    assert isinstance(chain, Chain) and chain.values == [0.5, 0.0] and chain.stopped_at == 1
    assert seen[-1] == 0.0  # 0.9 was never scored
    assert chain.outcome(-1.0, 1.0, float) == -1.0
    assert Chain[float]().outcome(-1.0, 1.0, float) == 1.0
    assert Chain([0.3, 0.7]).outcome(-1.0, 1.0, float) == 0.7


def test_fold_switches_to_a_coroutine_at_the_first_awaitable_and_keeps_the_order() -> None:
    order: list[Any] = []

    def score(item: tuple[str, float]) -> Any:
        order.append(item[0])
        return _later(item[1]) if item[0].startswith("async") else item[1]

    items = [("sync", 1.0), ("async1", 2.0), ("sync2", 3.0), ("async2", 4.0)]
    pending = fold(items, score, weighted_sum([1.0, 10.0, 100.0, 1000.0]), 0.0)
    assert inspect.iscoroutine(pending) and order == ["sync", "async1"]
    assert asyncio.run(pending) == 4321.0
    assert order == ["sync", "async1", "sync2", "async2"]
    chain = asyncio.run(fold([("async", 0.0), ("sync", 1.0)], score, fail_fast(lambda _i, v: v == 0.0),
                             Chain[float]()))
    assert chain.values == [0.0] and chain.stopped_at == 0


def test_gate_keeps_or_replaces_the_score() -> None:
    assert gate(0.6, 0.5) == 0.6 and gate(0.4, 0.5) == 0.0  # upstream's Gate
    assert gate(0.5, 0.5, on_pass=1.0, on_fail=-1.0) == 1.0  # our Threshold: the boundary passes
    assert gate(0.49, 0.5, on_pass=1.0, on_fail=-1.0) == -1.0


def test_discounted_return_and_credit() -> None:
    assert discounted_return([1.0, 1.0, 1.0], 0.5) == pytest.approx(1.75)
    assert discounted_return([1.0, 0.0], 0.5, normalize=True) == pytest.approx(1.0 / 1.5)
    assert discounted_credit(2.0, 0.5, 3) == [0.5, 1.0, 2.0]
    assert discounted_credit(2.0, 0.5, 0) == []


@pytest.mark.requires_plugins("rubrics")
def test_the_package_and_the_compat_layer_use_this_core() -> None:
    import openenv.core.rubrics.containers as compat
    import openenv.core.rubrics.trajectory as compat_trajectory
    import openenv.rubric_compose as core

    assert compat.fold is core.fold and compat.fail_fast is core.fail_fast and compat.gate is core.gate
    assert compat_trajectory.discounted_credit is core.discounted_credit
    from openenv_rubrics import compose
    assert compose.fold is core.fold and compose.weighted_total is core.weighted_total
