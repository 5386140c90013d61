"""The spawn provider keeps the provider contract: it starts the real ``echo`` env (needs
openenvkit-env-echo and a client transport such as openenvkit-transport-ws installed)."""

from __future__ import annotations

import os
import signal

from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing import ProviderContract, play
from openenv_provider_spawn.provider import SpawnProvider


def kill(handle: ProviderHandle) -> None:
    """Kill the server behind the provider's back (what ``check_stop_after_death`` needs)."""
    os.killpg(handle.proc.pid, signal.SIGKILL)  # type: ignore[attr-defined]


def test_spawn_keeps_the_provider_contract() -> None:
    contract = ProviderContract(SpawnProvider(), "echo", spec=LaunchSpec(env="echo", token="s3cret"),
                                kill=kill, round_trip=play({"message": "hi"}))
    assert contract.run() == ["check_lifecycle", "check_stop_after_death"]
    assert contract.skipped == ["check_gc_dead_owner"]  # it keeps no records another process could see
