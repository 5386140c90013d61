"""``bench.envcost``: real envs from the catalogue, bounded loops, a readable table."""

from __future__ import annotations

from typing import Any

import pytest

from bench.envcost import EnvCost, main, measure_all, measure_env, render_table
from openenv.errors import UnknownNameError


def test_measures_grid_world_reset_and_step() -> None:
    cost = measure_env("grid_world", steps=30, resets=5, budget_s=5)
    assert cost.error is None and cost.errors == 0
    assert (cost.resets, cost.steps) == (5, 30)
    assert cost.reset_us is not None and cost.reset_us > 0 and cost.step_us is not None and cost.step_us > 0


def test_a_broken_env_is_reported_not_raised() -> None:
    def broken() -> Any:
        raise RuntimeError("no simulator")

    cost = measure_env("broken", broken, steps=5, resets=1)
    assert cost.error is not None and "no simulator" in cost.error and cost.step_us is None
    assert "could not build" in render_table([cost])


def test_the_time_budget_bounds_the_loops() -> None:
    cost = measure_env("grid_world", steps=10**9, resets=10**9, budget_s=0.2)
    assert 0 < cost.steps < 10**9 and "time budget" in " ".join(cost.notes)


def test_table_and_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--envs", "echo,grid_world", "--steps", "5", "--resets", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["env", "load"] and [line.split()[0] for line in out[2:]] == ["echo", "grid_world"]
    with pytest.raises(UnknownNameError, match="Did you mean 'grid_world'"):
        measure_all(["grid_wrld"])
    assert render_table([EnvCost(env="x")]).splitlines()[2].startswith("x")
