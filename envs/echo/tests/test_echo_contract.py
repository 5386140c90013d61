"""``echo`` and ``echo_async`` keep the kit's env contract (served too when a client transport is
installed next to this package)."""

from __future__ import annotations

import pytest

from openenv.testing import EnvContract
from openenv_env_echo.env import AsyncEchoEnv, EchoEnv


@pytest.mark.parametrize("env", [EchoEnv, AsyncEchoEnv])
def test_echo_keeps_the_env_contract(env: type) -> None:
    ran = EnvContract(env, valid_actions=[{"message": "a"}, {"message": "hello"}]).run()
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action", "check_close",
            "check_concurrent_sessions"} <= set(ran)
