"""Every installed env is played through ``openenv run`` on the local provider (a real server in a
child process, over the ws transport), and the transcript is replayed in this process.

This is the one test each env package used to copy: its env registered and served by name, two
episodes of the CLI's random policy, every action one the env listed as legal, and the reward and
``done`` on each printed line the ones the env gives for the same seed. Env-specific checks of a
run (a game's length, a field's content) stay in the env's own tests. The served session rules
(reset, steps, state, bad input, close over every client transport) are ``EnvContract``'s:
tests/test_contracts_installed.py.
"""

from __future__ import annotations

import pytest

from openenv.plugins import PluginManager
from openenv.testing import replay_run, run_cli

pytestmark = pytest.mark.slow

_INSTALLED = PluginManager(strict=True)
ENVS = _INSTALLED.catalog.envs.names()
#: Seconds one ``openenv run`` may take: the sandboxed envs start a zygote on their first session.
TIMEOUT_S = {"coding": 180, "shell": 180, "reasoning_gym": 180}
#: Envs whose replay in this process cannot match the served run, and why.
NOT_REPLAYED = {
    "coding": "a tool env: the CLI sends wire-form tool calls (type list_tools/call_tool), not its action model",
    "echo_mcp": "a tool env: the CLI sends wire-form tool calls (type list_tools/call_tool), not its action model",
    "office": "a tool env: the CLI sends wire-form tool calls (type list_tools/call_tool), not its action model",
}


def test_the_workspace_envs_are_found() -> None:
    # The parametrised test below would pass vacuously if discovery found nothing.
    assert {"echo", "grid_world", "maze", "wordle"} <= set(ENVS)


@pytest.mark.parametrize("name", ENVS)
def test_every_installed_env_plays_through_openenv_run(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    done = run_cli("run", name, "--episodes", "2", "--seed", "1", "--max-steps", "8", tmp_path=tmp_path,
                   timeout=TIMEOUT_S.get(name, 120), env={"PYTHONWARNINGS": "ignore"})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert [line.split("  ")[0] for line in lines if "  reset  " in line] == ["episode 1", "episode 2"], done.stdout
    steps = [line for line in lines if line.startswith("  step ")]
    assert steps and all("  reward " in line and "  done " in line for line in steps), done.stdout
    if name in NOT_REPLAYED:
        return
    env = _INSTALLED.catalog.envs.load(name)()
    try:  # closed: an env left open holds what it uses (MiniWoB's shared browser) for later tests
        replayed = replay_run(done.stdout, env, seed=1)
    finally:
        env.close()
    for line, obs in replayed:
        if line.startswith("  step "):
            assert f"reward {obs.reward:g}  done {str(obs.done).lower()}" in line, (line, obs)
