"""bench.catalog2 measures what it says: every Atari row plays its steps (no speed is asserted)."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv_env_atari")

from bench.catalog2 import _pct, measure_atari


def test_percentiles_pick_from_the_samples() -> None:
    assert _pct([3.0, 1.0, 2.0], 0.5) == 2.0 and _pct([1.0, 2.0], 0.99) == 2.0


def test_atari_rows_play_every_step() -> None:
    rows = measure_atari(25)
    assert set(rows) == {"ram", "grayscale84", "grayscale84+png"}
    assert all(row["steps"] == 25 and row["steps_per_s"] > 0 for row in rows.values())
