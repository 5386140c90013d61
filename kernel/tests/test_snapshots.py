"""Snapshots in the kernel (openenv.snapshots, SessionManager.snapshot/restore, the env rule, the
contract's check); the wire round trip is tested with the ws transport."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import ModeError, RuleViolation, SnapshotError
from openenv.sessions import SessionManager
from openenv.snapshots import rng_state, seal, set_rng_state, unseal
from openenv.testing import ContractError, EnvContract, WalkAction, WalkEnv, WalkObservation
from openenv.types import State


class Forgetful(WalkEnv):
    """Leaves the generator out of its snapshot: a restored episode draws other numbers."""

    def snapshot(self) -> dict[str, Any]:
        data = super().snapshot()
        del data["rng"]
        return data

    def restore(self, data: dict[str, Any]) -> WalkObservation:
        rng = random.Random(12345)
        return super().restore({**data, "rng": rng_state(rng)})


def test_the_contract_checks_a_restored_episode_continues_exactly() -> None:
    assert "check_snapshot" in EnvContract(WalkEnv, served=False).run()
    with pytest.raises(ContractError, match="did the snapshot leave out a random generator"):
        EnvContract(Forgetful, served=False).run()


def test_declaring_snapshots_without_implementing_them_is_refused_at_class_creation() -> None:
    with pytest.raises(RuleViolation, match="does not implement snapshot and restore"):
        class Half(Environment[WalkAction, WalkObservation, State]):
            SUPPORTS_SNAPSHOT = True


def test_seal_and_unseal_rules() -> None:
    snap = seal(WalkEnv, {"a": (1, 2)}, 3, b"k")
    assert snap["state"] == {"a": [1, 2]}  # what a client will hold
    assert unseal(snap, WalkEnv, b"k") is snap
    with pytest.raises(SnapshotError, match="sealed with another key") as info:
        unseal(snap, WalkEnv, b"other")
    assert info.value.reason == "tampered"
    with pytest.raises(SnapshotError) as info:
        seal(WalkEnv, {"x": {1, 2}}, 0, None)
    assert info.value.reason == "malformed"
    with pytest.raises(SnapshotError, match="Not a snapshot"):
        unseal([1], WalkEnv, None)


def test_rng_state_round_trip_and_garbage() -> None:
    rng = random.Random(9)
    data = rng_state(rng)
    expected = [rng.random() for _ in range(3)]
    other = random.Random()
    set_rng_state(other, data)
    assert [other.random() for _ in range(3)] == expected
    with pytest.raises(ValueError, match="not a random generator state"):
        set_rng_state(other, {"nope": 1})


async def _episode(manager: SessionManager) -> tuple[Any, dict[str, Any]]:
    session = await manager.open()
    await manager.reset(session, {"seed": 4})
    await manager.step(session, {"delta": 1})
    return session, await manager.snapshot(session)


def test_manager_restore_sets_the_step_count_and_a_bad_env_state_fails_cleanly() -> None:
    async def main() -> None:
        manager = SessionManager(WalkEnv, max_sessions=4)
        _first, snap = await _episode(manager)
        second = await manager.open()
        outcome = await manager.restore(second, snap)
        assert second.step_count == 1 and second.reset_done
        assert outcome.observation.position == snap["state"]["position"]
        # The env refuses data it cannot continue from: an EXECUTION_ERROR, the session still usable.
        bad = seal(WalkEnv, {"position": "far"}, 1, None)
        with pytest.raises(Exception, match="not a WalkEnv snapshot"):
            await manager.restore(second, bad)
        assert (await manager.step(second, {"delta": 0})).position is not None
        await manager.shutdown()

    asyncio.run(main())


def test_strict_production_refuses_snapshot_and_restore_like_state_and_reset() -> None:
    async def main() -> None:
        sim = SessionManager(WalkEnv, max_sessions=2)
        _, snap = await _episode(sim)
        await sim.shutdown()
        prod = SessionManager(WalkEnv, max_sessions=2, mode="production", strict_production=True)
        session = await prod.open()
        with pytest.raises(ModeError):
            await prod.restore(session, snap)
        await prod.shutdown()

    asyncio.run(main())
