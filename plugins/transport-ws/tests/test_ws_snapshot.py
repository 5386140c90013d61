"""Snapshots over /ws (the ``snapshot`` extension, openenv.snapshots): fork mid-episode, restore on
another server, and every refusal, each leaving the session usable."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from ws_support import EchoEnv, LiveServer, live_server, rpc, ws_open

from openenv import EnvClient
from openenv.errors import ConfigError, SnapshotError
from openenv.snapshots import KEY_ENV
from openenv.testing import WalkAction, WalkEnv, WalkObservation


class OtherWalk(WalkEnv):
    """Another env class with the same data: a snapshot of WalkEnv must not restore here."""


@pytest.fixture
def walk() -> Iterator[LiveServer]:
    with live_server(WalkEnv, max_sessions=8) as srv:
        yield srv


def client(server: LiveServer) -> EnvClient[Any, Any]:
    return EnvClient(server.url, action_type=WalkAction, observation_type=WalkObservation)


def positions(results: list[Any]) -> list[tuple[int, int, bool]]:
    return [(r.observation.position, r.observation.noise, r.done) for r in results]


async def test_fork_branches_are_independent_and_match_a_replay(walk: LiveServer) -> None:
    head = ([2, -1, 3], [1, 1, -3, 0])
    async with client(walk) as env:
        await env.reset(seed=7)
        for delta in head[0]:
            await env.step(WalkAction(delta=delta))
        branch, _at = await env.fork()
        assert (await branch.state()).step_count == 3
        # Both continue with the same actions: the same episode, drawn from the same generator state.
        a = [await env.step(WalkAction(delta=d)) for d in head[1]]
        b = [await branch.step(WalkAction(delta=d)) for d in head[1]]
        assert positions(a) == positions(b)
        # A replay of the whole episode from the seed gives the same observations.
        replay = client(walk)
        async with replay:
            await replay.reset(seed=7)
            for delta in head[0]:
                await replay.step(WalkAction(delta=delta))
            assert positions([await replay.step(WalkAction(delta=d)) for d in head[1]]) == positions(a)
        # Independent: stepping one branch differently leaves the other where it was.
        before = (await branch.state()).step_count
        await env.step(WalkAction(delta=3))
        assert (await branch.state()).step_count == before == 7
        assert len(walk.ctx.sessions.sessions()) == 2
    assert walk.ctx.sessions.sessions() == []  # the fork closed with its parent


async def test_restore_continues_on_another_server_and_survives_json(walk: LiveServer) -> None:
    with live_server(WalkEnv) as second:
        async with client(walk) as env, client(second) as other:
            await env.reset(seed=3)
            await env.step(WalkAction(delta=1))
            snap = await env.snapshot()
            assert snap["format"] == "openenv.snapshot/1" and snap["step_count"] == 1
            assert snap["env"] == "openenv.testing.walk:WalkEnv" and snap["keyed"] is False
            _, result = await env.fork(into=other)
            assert result.observation.position == snap["state"]["position"]
            assert (await other.state()).step_count == 1
            step = WalkAction(delta=2)
            assert positions([await other.step(step)]) == positions([await env.step(step)])


def _tampered(snap: dict[str, Any]) -> dict[str, Any]:
    bad = copy.deepcopy(snap)
    bad["state"]["position"] += 100
    return bad


@pytest.mark.parametrize(("change", "reason"), [
    (_tampered, "tampered"),
    (lambda s: {**s, "env_version": "0.0.1"}, "other_version"),
    (lambda s: {**s, "env": "pkg.mod:Elsewhere"}, "other_env"),
    (lambda s: {**s, "format": "openenv.snapshot/99"}, "malformed"),
    (lambda s: {k: v for k, v in s.items() if k != "seal"}, "malformed"),
    (lambda s: {**s, "step_count": -1}, "malformed"),
    (lambda s: {**s, "state": {**s["state"], "position": "x"}, "seal": "0" * 64}, "tampered"),
])
async def test_a_refused_snapshot_names_the_rule_and_keeps_the_session(walk: LiveServer, change: Any,
                                                                       reason: str) -> None:
    async with client(walk) as env:
        await env.reset(seed=1)
        await env.step(WalkAction(delta=1))
        snap = await env.snapshot()
        with pytest.raises(SnapshotError) as info:
            await env.restore(change(snap))
        assert info.value.reason == reason and info.value.code == "SNAPSHOT_ERROR"
        assert (await env.step(WalkAction(delta=0))).observation is not None  # still usable
        assert (await env.state()).step_count == 2


async def test_a_snapshot_of_another_env_class_is_refused(walk: LiveServer) -> None:
    with live_server(OtherWalk) as other_server:
        async with client(walk) as env, client(other_server) as other:
            await env.reset(seed=1)
            with pytest.raises(SnapshotError, match="restore it on a server of the env") as info:
                await other.restore(await env.snapshot())
            assert info.value.reason == "other_env"


async def test_servers_with_different_keys_refuse_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "key-one")
    with live_server(WalkEnv) as first:
        monkeypatch.setenv(KEY_ENV, "key-two")
        with live_server(WalkEnv) as second:
            async with client(first) as a, client(second) as b:
                await a.reset(seed=1)
                snap = await a.snapshot()
                assert snap["keyed"] is True
                with pytest.raises(SnapshotError, match=f"share {KEY_ENV}"):
                    await b.restore(snap)
                monkeypatch.setenv(KEY_ENV, "key-one")
                with live_server(WalkEnv) as third:  # same key: accepted
                    async with client(third) as c:
                        assert (await c.restore(snap)).observation.position == 0


async def test_snapshot_before_reset_and_on_an_env_without_snapshots(walk: LiveServer) -> None:
    async with client(walk) as env:
        with pytest.raises(SnapshotError, match="call reset first") as info:
            await env.snapshot()
        assert info.value.reason == "not_started"
    with live_server(EchoEnv) as echo:
        async with EnvClient(echo.url) as plain:
            await plain.reset()
            with pytest.raises(SnapshotError, match="does not support snapshots") as info:
                await plain.snapshot()
            assert info.value.reason == "unsupported"
            assert (await plain.step({"message": "still here"})).observation["echoed_message"] == "still here"


async def test_frames_need_the_extension(walk: LiveServer) -> None:
    ws = await ws_open(walk)
    assert (await rpc(ws, {"type": "snapshot"}))["data"]["code"] == "UNKNOWN_TYPE"
    await rpc(ws, {"type": "hello", "data": {"want": ["snapshot"]}})
    await rpc(ws, {"type": "reset", "data": {"seed": 2}})
    snap = (await rpc(ws, {"type": "snapshot"}))["data"]
    reply = await rpc(ws, {"type": "restore"})  # data is required
    assert reply["data"]["code"] == "VALIDATION_ERROR"
    reply = await rpc(ws, {"type": "restore", "data": snap})
    assert reply["type"] == "observation" and reply["data"]["observation"]["position"] == 0
    await ws.close()


async def test_a_client_says_when_the_server_has_no_snapshot_extension() -> None:
    from openenv.protocol import EXT_SNAPSHOT

    env: EnvClient[Any, Any] = EnvClient("http://127.0.0.1:1")  # never connected: an upstream-like hello
    env._extensions = {"tasks"}
    with pytest.raises(ConfigError, match=EXT_SNAPSHOT):
        await env.snapshot()


def test_sync_fork_and_process_isolation() -> None:
    with live_server(WalkEnv, isolation="process", max_sessions=2) as srv, client(srv).sync() as env:
        env.reset(seed=5)
        env.step(WalkAction(delta=1))
        branch, _at = env.fork()
        with branch:
            assert branch.state().step_count == 1
            assert positions([branch.step(WalkAction(delta=2))]) == positions([env.step(WalkAction(delta=2))])
