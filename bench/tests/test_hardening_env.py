"""The hardening benchmark's env: a hung step really blocks, and ``release`` really ends it
(the benchmark's quiet rounds rely on it: no stuck call left beside them)."""

from __future__ import annotations

import threading

from bench.hardening import MisbehavingEnv, Say


def _hang_in_thread(env: MisbehavingEnv) -> tuple[threading.Thread, list[str]]:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(env.step(Say(message="hang")).echoed), daemon=True)
    t.start()
    return t, out


def test_a_hung_step_blocks_until_released_and_the_next_round_hangs_again() -> None:
    env = MisbehavingEnv()
    first, out = _hang_in_thread(env)
    first.join(0.2)
    assert first.is_alive() and out == []  # hung
    assert env.step(Say(message="release")).echoed == "release"
    first.join(5)
    assert not first.is_alive() and out == ["hang"]
    second, out2 = _hang_in_thread(env)  # a new round: the release is not sticky
    second.join(0.2)
    assert second.is_alive()
    env.step(Say(message="release"))
    second.join(5)
    assert out2 == ["hang"]
    assert env.step(Say(message="ok")).echoed == "ok"
