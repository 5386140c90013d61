"""``grid_world`` keeps the kit's env contract (served too when a client transport is installed)."""

from __future__ import annotations

from openenv.testing import EnvContract
from openenv_env_grid_world.env import GridWorldEnv


def test_grid_world_keeps_the_env_contract() -> None:
    ran = EnvContract(GridWorldEnv, valid_actions=[{"move": m} for m in ("up", "down", "left", "right")],
                      invalid_action={"move": "sideways"}).run()
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action"} <= set(ran)
