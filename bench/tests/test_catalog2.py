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


def test_mujoco_rows_play_every_step() -> None:
    pytest.importorskip("openenv_env_mujoco")
    from bench.catalog2 import MUJOCO_ROWS, measure_mujoco

    rows = measure_mujoco(12, 3)
    assert set(rows) == set(MUJOCO_ROWS)
    for label, row in rows.items():
        if "error" in row:  # only an image row may be refused, and only for want of offscreen OpenGL
            assert "png" in label and "offscreen rendering is not available" in row["error"], row
            continue
        assert row["steps"] == (3 if "png" in label else 12) and row["steps_per_s"] > 0, (label, row)


def test_the_kernel_row_times_real_runs_of_the_same_snippet() -> None:
    pytest.importorskip("openenv_env_jupyter")
    pytest.importorskip("openenv_env_coding")
    from bench.catalog2 import SNIPPET, measure_kernel

    # More samples than the coding env's default 10 steps: past them it answered without running
    # (a 0.02 ms "fresh process"); measure_kernel raises when an answer lacks the snippet's output.
    row = measure_kernel(12)
    assert row["snippet"] == SNIPPET
    assert all(row[k]["n"] == 12 for k in ("persistent_kernel", "coding_fresh_process", "cold_interpreter"))
    assert row["p50_ratio"] > 0 and row["goal_met"] == (row["p50_ratio"] <= row["goal_ratio"])
    # The kernel's own stamps, in the order it sends its messages, and the client reads idle last.
    line = row["kernel_timeline_p50_ms"]["snippet"]
    assert list(line) == ["busy", "execute_input", "stream", "idle", "client"], line
    assert 0 < line["busy"] <= line["idle"] <= line["client"], line
    assert set(row["kernel_timeline_p50_ms"]["empty_silent_cell"]) == {"busy", "idle", "client"}
