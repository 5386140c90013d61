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


def test_reset_options_and_labelled_rows(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--envs", "grid_world", "--steps", "5", "--resets", "2", "--json",
            "--reset", 'grid_world={"episode_id": "fixed"}', "--reset", 'g2:grid_world={"episode_id": "other"}']
    assert main(argv) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["results"]
    assert [r["env"] for r in rows] == ["grid_world", "g2"] and all(r["steps"] == 5 for r in rows)
    from openenv_env_grid_world import GridWorldEnv

    class Picky(GridWorldEnv):
        def reset(self, seed=None, episode_id=None, **kwargs):  # type: ignore[no-untyped-def]
            if kwargs:
                raise ValueError(f"unknown reset options {sorted(kwargs)}")
            return super().reset(seed, episode_id)

    cost = measure_env("picky", Picky, steps=3, resets=1, reset_kwargs={"no_such_option": 1})
    assert cost.error == "reset failed: ValueError: unknown reset options ['no_such_option']"
    assert measure_env("picky", Picky, steps=3, resets=1).error is None
    with pytest.raises(SystemExit, match="not JSON"):
        main(["--reset", "grid_world={oops"])
