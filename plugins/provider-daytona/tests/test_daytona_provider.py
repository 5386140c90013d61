"""The daytona provider with the real ``daytona`` SDK against a local fake of Daytona's API."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from daytona_fake import FakeDaytona

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing import LISTINGS, ProviderContract, check_cli_imports, free_port, orphan_from
from openenv_provider_daytona.provider import DaytonaHandle, DaytonaProvider

HERE = Path(__file__).parent

#: Tests that serve an env need the echo env and the ws transport (the integration session has them;
#: the per-package session installs only the kernel and this package).
SERVES = pytest.mark.requires_plugins("env-echo", "transport-ws")


def spec(**options: object) -> LaunchSpec:
    return LaunchSpec(env="echo", startup_timeout_s=120.0, options={
        "image": "python:3.11", "host": "127.0.0.1", "port": free_port(), **options})


@SERVES
@pytest.mark.slow
def test_provider_contract(fake: FakeDaytona) -> None:
    def kill(handle: ProviderHandle) -> None:
        assert isinstance(handle, DaytonaHandle)
        fake.kill_server(handle.sandbox.id)

    def orphan() -> str:
        found = orphan_from([sys.executable, str(HERE / "helpers_orphan.py"), str(free_port())])
        assert found.startswith("daytona-"), found
        return found

    ran = ProviderContract(DaytonaProvider(), "echo", spec=spec(), kill=kill, orphan=orphan).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert fake.sandboxes == {}


@SERVES
@pytest.mark.slow
def test_sandbox_request_carries_labels_env_and_image(fake: FakeDaytona) -> None:
    launch = spec()
    launch.env_vars = {"SECRET": "hunter2"}
    launch.token = "tok-1"
    handle = DaytonaProvider().start(launch)
    try:
        body = fake.sandboxes[handle.sandbox.id]["body"]
        assert body["labels"]["openenv.id"] == handle.id and body["labels"]["openenv.env"] == "echo"
        assert body["env"] == {"SECRET": "hunter2", "OPENENV_TOKEN": "tok-1"}
        assert "FROM python:3.11" in body["buildInfo"]["dockerfileContent"]
        commands = fake.sandboxes[handle.sandbox.id]["commands"]
        assert len(commands) == 1 and commands[0].startswith("openenv serve echo --host 127.0.0.1")
        assert "hunter2" not in commands[0] and "tok-1" not in commands[0]  # secrets: env only
    finally:
        handle.stop()
    handle.stop()


def test_missing_api_key_names_the_variable(fake: FakeDaytona, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAYTONA_API_KEY")
    with pytest.raises(ConfigError, match="set DAYTONA_API_KEY") as info:
        DaytonaProvider().start(spec())
    assert "\n" not in str(info.value)
    assert fake.create_attempts == 0


def test_wrong_api_key_names_the_variable(fake: FakeDaytona, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAYTONA_API_KEY", "not-the-key")
    with pytest.raises(ConfigError, match=r"refused the credentials.*set DAYTONA_API_KEY") as info:
        DaytonaProvider().start(spec())
    assert "\n" not in str(info.value)


@SERVES
@pytest.mark.slow
def test_rate_limited_create_is_retried_then_succeeds(fake: FakeDaytona) -> None:
    fake.rate_limit_creates = 2
    handle = DaytonaProvider().start(spec())
    handle.stop()
    assert fake.create_attempts == 3


def test_rate_limit_that_does_not_end_is_reported(fake: FakeDaytona) -> None:
    fake.rate_limit_creates = 100
    with pytest.raises(RuntimeError, match="rate or quota limits after 3 attempts"):
        DaytonaProvider().start(spec(create_retries=2))
    assert fake.create_attempts == 3 and fake.sandboxes == {}


def test_sandbox_that_never_becomes_ready_is_deleted(fake: FakeDaytona) -> None:
    launch = spec(command="sleep 600")
    launch.startup_timeout_s = 4.0
    with pytest.raises(TimeoutError, match="did not become ready"):
        DaytonaProvider().start(launch)
    assert fake.sandboxes == {} and len(fake.deleted) == 1


@pytest.mark.parametrize(("state", "error", "match"), [
    ("starting", TimeoutError, "did not reach 'started' within 3 s .*it was deleted"),
    ("error", Exception, "entered error state")])
def test_sandbox_that_never_reaches_started_is_deleted(fake: FakeDaytona, state: str,
                                                       error: type[Exception], match: str) -> None:
    fake.start_state = state  # stuck in `starting` until the timeout, or failed into `error`
    launch = spec()
    launch.startup_timeout_s = 3.0
    with pytest.raises(error, match=match):
        DaytonaProvider().start(launch)
    assert fake.sandboxes == {} and len(fake.deleted) == 1


def test_server_that_exits_is_reported_and_its_sandbox_deleted(fake: FakeDaytona) -> None:
    with pytest.raises(RuntimeError, match="exited with code 3"):
        DaytonaProvider().start(spec(command="echo failing on purpose; exit 3"))
    assert fake.sandboxes == {}


def test_bad_options_are_refused_before_any_call(fake: FakeDaytona) -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'imag'.*image"):
        DaytonaProvider().start(LaunchSpec(env="echo", options={"imag": "x"}))
    with pytest.raises(ConfigError, match="needs a sandbox source"):
        DaytonaProvider().start(LaunchSpec(env="echo"))
    assert fake.create_attempts == 0


@pytest.mark.parametrize("args", LISTINGS)
def test_cli_listings_never_import_the_sdk(args: tuple[str, ...]) -> None:
    check_cli_imports(args, loaded="openenv_provider_daytona.plugin",
                      forbidden=["daytona*", "openenv_provider_daytona.provider"])

