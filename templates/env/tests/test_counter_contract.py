"""The counter env keeps the env contract, and its own rules hold."""

from __future__ import annotations

from openenv.testing import EnvContract
from openenv_env_counter import CountAction, CounterEnv


def test_counter_keeps_the_env_contract() -> None:
    # Served over a real server too when a client transport (e.g. openenvkit-transport-ws) is installed.
    ran = EnvContract(CounterEnv, valid_actions=[{"amount": 1}, {"amount": 3}]).run()
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action"} <= set(ran)


def test_landing_on_the_target_wins_and_passing_it_loses() -> None:
    env = CounterEnv()
    first = env.reset()
    assert (first.value, first.target) == (0, 10)
    results = [env.step(CountAction(amount=3)) for _ in range(3)]
    assert [r.value for r in results] == [3, 6, 9] and not results[-1].done
    assert env.step(CountAction(amount=1)).reward == 1.0
    env.reset()
    for _ in range(3):
        env.step(CountAction(amount=3))
    last = env.step(CountAction(amount=3))
    assert last.done and last.reward == -1.0
