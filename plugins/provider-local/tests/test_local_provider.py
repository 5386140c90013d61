"""The ``local`` provider with real child processes and real servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from provider_local_support import (
    TINY,
    descendants,
    group_alive,
    kill_server,
    needs_ws,
    spec,
    start_orphan,
    wait_until,
)

from openenv.errors import ConfigError, UnknownNameError
from openenv.interfaces import LaunchSpec, owner_id
from openenv.testing.contracts import ProviderContract
from openenv_provider_local.local import LocalProvider
from openenv_provider_local.records import Record, read_records, write_record


@needs_ws
def test_start_round_trip_stop_and_stop_again(state_dir: Path) -> None:
    from openenv.client import GenericEnvClient

    provider = LocalProvider()
    handle = provider.start(spec(max_sessions=1))
    try:
        assert handle.base_url.startswith("http://127.0.0.1:")
        assert handle.is_running()
        record = json.loads((state_dir / f"{handle.id}.json").read_text())
        assert record["pid"] == handle.pid and record["owner"] == owner_id()
        assert record["base_url"] == handle.base_url
        # max_sessions=1: the readiness probe's session must be gone before we connect.
        with GenericEnvClient(handle.base_url).sync() as env:
            env.reset()
            assert env.step({"value": 4}).observation["total"] == 4
            assert env.step({"value": 3}).reward == 3.0
        assert "serving on" in handle.logs()
    finally:
        handle.stop()
    assert not handle.is_running() and handle.exit_code is not None
    assert not (state_dir / f"{handle.id}.json").exists()
    assert not Path(handle.log_path).exists()  # logs are removed on a clean stop by default
    assert "serving on" in handle.logs()  # ...but their tail stays readable on the handle
    handle.stop()  # idempotent
    assert provider.ps() == []


@needs_ws
def test_every_process_is_reaped(state_dir: Path) -> None:
    provider = LocalProvider()
    handles = [provider.start(spec()) for _ in range(3)]
    try:
        mine = set(descendants())
        assert {h.pid for h in handles} <= mine
        assert {h.id for h in provider.ps()} == {h.id for h in handles}
    finally:
        for h in handles:
            h.stop()
    assert not ({h.pid for h in handles} & set(descendants()))
    assert all(not group_alive(h.pgid) for h in handles)
    assert read_records() == []


@needs_ws
def test_secrets_travel_in_the_environment_not_argv() -> None:
    import httpx

    provider = LocalProvider()
    handle = provider.start(spec(token="tok-s3cret", env_vars={"MY_API_KEY": "key-s3cret"}))
    try:
        cmdline = Path(f"/proc/{handle.pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{handle.pid}/environ").read_bytes().split(b"\0")
        assert b"s3cret" not in cmdline
        assert b"OPENENV_TOKEN=tok-s3cret" in environ and b"MY_API_KEY=key-s3cret" in environ
        assert httpx.get(handle.base_url + "/capabilities").status_code == 401
        ok = httpx.get(handle.base_url + "/capabilities", headers={"Authorization": "Bearer tok-s3cret"})
        assert ok.status_code == 200 and ok.json()["auth"] is True
    finally:
        handle.stop()


@needs_ws
def test_no_token_means_none_even_if_the_caller_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TOKEN", "callers-own-token")
    handle = LocalProvider().start(spec())
    try:
        environ = Path(f"/proc/{handle.pid}/environ").read_bytes().split(b"\0")
        assert not any(v.startswith(b"OPENENV_TOKEN=") for v in environ)
    finally:
        handle.stop()


def test_child_crashing_at_import_fails_at_once_with_its_log(state_dir: Path) -> None:
    with pytest.raises(RuntimeError) as info:
        LocalProvider().start(spec("crash_at_import:Env", startup_timeout_s=60))
    message = str(info.value)
    assert "exited with code 1 during start-up" in message
    assert "crash_at_import: this env module fails on purpose" in message  # the log tail
    assert read_records() == []


def test_child_that_never_gets_ready_times_out_and_is_killed(state_dir: Path) -> None:
    with pytest.raises(TimeoutError) as info:
        LocalProvider().start(spec("hang_at_import:Env", startup_timeout_s=1.5))
    assert "did not become ready within 1.5s" in str(info.value)
    assert "startup_timeout_s" in str(info.value)
    assert read_records() == []


class _Interrupt(BaseException):
    pass


def test_interrupt_during_start_kills_the_child() -> None:
    def raise_interrupt(*_: object) -> None:
        raise _Interrupt

    previous = signal.signal(signal.SIGUSR1, raise_interrupt)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGUSR1))
    timer.start()
    try:
        with pytest.raises(_Interrupt):
            LocalProvider().start(spec("hang_at_import:Env", startup_timeout_s=30))
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert read_records() == []


def test_unknown_env_and_option_fail_before_anything_starts() -> None:
    before = set(descendants())
    with pytest.raises(UnknownNameError, match="Unknown env 'no_such_env_xyz'"):
        LocalProvider().start(LaunchSpec(env="no_such_env_xyz"))
    with pytest.raises(ConfigError, match="Did you mean 'keep_logs'"):
        LocalProvider().start(spec(options={"keep_log": True}))
    assert set(descendants()) == before


@needs_ws
def test_server_started_from_a_short_lived_thread_outlives_it() -> None:
    # PR_SET_PDEATHSIG fires when the forking *thread* exits; the provider must not let that
    # kill servers started from worker threads (asyncio.to_thread, pools).
    provider = LocalProvider()
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(handle=provider.start(spec())))
    worker.start()
    worker.join(timeout=60)
    handle = box["handle"]
    try:
        assert not worker.is_alive()
        assert not wait_until(lambda: not handle.is_running(), timeout_s=1.0)  # type: ignore[attr-defined]
    finally:
        handle.stop()  # type: ignore[attr-defined]


@needs_ws
def test_stop_after_the_server_was_killed() -> None:
    provider = LocalProvider()
    handle = provider.start(spec())
    kill_server(handle)
    assert wait_until(lambda: not handle.is_running())
    handle.stop()
    assert handle.exit_code == -signal.SIGKILL
    assert provider.ps(all_owners=True) == []


@needs_ws
def test_servers_die_with_their_owner() -> None:
    server_id, pgid = start_orphan("local", detach=False)
    assert wait_until(lambda: not group_alive(pgid), timeout_s=15)
    assert server_id not in [h.id for h in LocalProvider().ps(all_owners=True)]


@needs_ws
def test_gc_kills_detached_servers_of_a_dead_owner() -> None:
    provider = LocalProvider()
    server_id, pgid = start_orphan("local", detach=True)
    try:
        listed = {h.id: h for h in provider.ps(all_owners=True)}
        assert listed[server_id].status == "orphaned"
        assert group_alive(pgid)
        assert server_id not in [h.id for h in provider.ps()]  # not ours
        removed = provider.gc()
        assert [h.id for h in removed] == [server_id]
        assert not group_alive(pgid)
        assert provider.ps(all_owners=True) == []
    finally:
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)


def test_stale_records_are_dropped(state_dir: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    write_record(Record(id="local-stale", provider="local", pid=dead.pid, pgid=dead.pid,
                        owner=owner_id(), base_url="http://127.0.0.1:1", env="x"))
    write_record(Record(id="local-gc-stale", provider="local", pid=dead.pid, pgid=dead.pid,
                        owner="elsewhere:1:1", env="x"))
    (state_dir / "garbage.json").write_text("{not json")
    provider = LocalProvider()
    removed = provider.gc()
    assert sorted((h.id, h.status) for h in removed) == [("local-gc-stale", "stale"),
                                                         ("local-stale", "stale")]
    assert read_records() == []
    write_record(Record(id="local-stale", provider="local", pid=dead.pid, pgid=dead.pid,
                        owner=owner_id(), env="x"))
    assert provider.ps(all_owners=True) == []  # listing drops stale records too
    assert not (state_dir / "local-stale.json").exists()


@needs_ws
def test_local_provider_contract() -> None:
    ran = ProviderContract(
        LocalProvider(), TINY, spec=spec(), kill=kill_server,
        orphan=lambda: start_orphan("local")[0],
    ).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


def test_gc_sweeps_old_logs_of_failed_starts(state_dir: Path) -> None:
    with pytest.raises(RuntimeError):
        LocalProvider().start(spec("crash_at_import:Env"))
    (log,) = state_dir.glob("local-*.log")  # kept: the error message points to it
    LocalProvider().gc()
    assert log.exists()  # young: the user may still be reading it
    os.utime(log, (0, 0))
    LocalProvider().gc()
    assert not log.exists()


@needs_ws
def test_default_spec_leaves_the_session_bound_to_the_server() -> None:
    """``LaunchSpec()`` without ``max_sessions`` gets ``openenv serve``'s default: a concurrency-safe
    env (TinyEnv) serves many sessions at once; an explicit ``max_sessions`` still bounds them."""
    import httpx

    from openenv.client import GenericEnvClient
    from openenv.errors import CapacityError
    from openenv.sessions import DEFAULT_CONCURRENT_SESSIONS

    provider = LocalProvider()
    assert "--max-sessions" not in provider.serve_args(spec(), Path("ready"))
    with provider.start(spec()) as handle:
        caps = httpx.get(handle.base_url + "/capabilities", timeout=10).json()
        assert caps["max_sessions"] == DEFAULT_CONCURRENT_SESSIONS
        clients = [GenericEnvClient(handle.base_url).sync() for _ in range(3)]
        try:
            for i, env in enumerate(clients):
                env.reset()
                assert env.step({"value": i + 1}).observation["total"] == i + 1
        finally:
            for env in clients:
                env.close()
    with provider.start(spec(max_sessions=2)) as handle:
        first, second = (GenericEnvClient(handle.base_url).sync() for _ in range(2))
        try:
            first.reset()
            second.reset()
            with pytest.raises(CapacityError) as err, GenericEnvClient(handle.base_url).sync() as third:
                third.reset()
            assert err.value.max_sessions == 2
        finally:
            first.close()
            second.close()
