"""The aca provider with the real azure-containerapps-sandbox SDK against a local HTTPS fake."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aca_fake import TOKEN, FakeAca, FakeCredential

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing import LISTINGS, ProviderContract, check_cli_imports, free_port, orphan_from
from openenv_provider_aca.provider import AcaHandle, AcaProvider

HERE = Path(__file__).parent

#: Tests that serve an env need the echo env and the ws transport (the integration session has them;
#: the per-package session installs only the kernel and this package).
SERVES = pytest.mark.requires_plugins("env-echo", "transport-ws")


def spec(**options: object) -> LaunchSpec:
    return LaunchSpec(env="echo", startup_timeout_s=120.0, options={
        "disk": "ubuntu", "host": "127.0.0.1", "port": free_port(), "poll_interval_s": 1, **options})


def provider(token: str = TOKEN, **kwargs: object) -> AcaProvider:
    return AcaProvider(credential=FakeCredential(token), **kwargs)


@SERVES
@pytest.mark.slow
def test_provider_contract(fake: FakeAca) -> None:
    def kill(handle: ProviderHandle) -> None:
        assert isinstance(handle, AcaHandle)
        fake.kill_server(handle.sandbox_id)

    def orphan() -> str:
        found = orphan_from([sys.executable, str(HERE / "helpers_orphan.py"), TOKEN, str(free_port())])
        assert found.startswith("aca-"), found
        return found

    ran = ProviderContract(provider(), "echo", spec=spec(), kill=kill, orphan=orphan).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert fake.sandboxes == {}


@SERVES
@pytest.mark.slow
def test_sandbox_request_carries_labels_environment_and_no_secret_in_the_command(fake: FakeAca) -> None:
    launch = spec()
    launch.env_vars = {"SECRET": "hunter2"}
    launch.token = "tok-1"
    handle = provider().start(launch)
    try:
        record = fake.sandboxes[handle.sandbox_id]
        assert record["labels"]["openenv.id"] == handle.id
        assert record["body"]["sourcesRef"] == {"diskImage": {"name": "ubuntu", "isPublic": True}}
        assert record["environment"] == {"SECRET": "hunter2", "OPENENV_TOKEN": "tok-1"}
        assert len(record["commands"]) == 1 and "openenv serve echo" in record["commands"][0]
        assert "hunter2" not in record["commands"][0] and "tok-1" not in record["commands"][0]
    finally:
        handle.stop()
    handle.stop()


@pytest.mark.parametrize("variable", ["AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "ACA_SANDBOX_GROUP"])
def test_missing_setting_names_the_variable(fake: FakeAca, monkeypatch: pytest.MonkeyPatch,
                                            variable: str) -> None:
    monkeypatch.delenv(variable)
    with pytest.raises(ConfigError, match=f"needs {variable} set") as info:
        provider().start(spec())
    assert "\n" not in str(info.value) and fake.create_attempts == 0


def test_refused_token_says_what_to_set(fake: FakeAca) -> None:
    with pytest.raises(ConfigError, match=r"refused the credentials.*AZURE_CLIENT_SECRET") as info:
        provider(token="expired").start(spec())
    assert "\n" not in str(info.value) and fake.sandboxes == {}


@SERVES
@pytest.mark.slow
def test_rate_limited_create_is_retried_then_succeeds(fake: FakeAca) -> None:
    fake.rate_limit_creates = 2
    handle = provider().start(spec())
    handle.stop()
    assert fake.create_attempts == 3


def test_rate_limit_that_does_not_end_is_reported(fake: FakeAca) -> None:
    fake.rate_limit_creates = 100
    with pytest.raises(RuntimeError, match=r"rate or quota limits \(HTTP 429\)"):
        provider(retry_total=2).start(spec())
    assert fake.create_attempts == 3 and fake.sandboxes == {}


def test_sandbox_that_never_becomes_ready_is_deleted(fake: FakeAca) -> None:
    launch = spec(command="sleep 600")
    launch.startup_timeout_s = 6.0
    with pytest.raises(TimeoutError, match="did not become ready"):
        provider().start(launch)
    assert fake.sandboxes == {} and len(fake.deleted) == 1



def test_readiness_timeout_shows_the_server_output(fake: FakeAca) -> None:
    launch = spec(command="echo aca-log-marker-29; sleep 600")
    launch.startup_timeout_s = 6.0
    with pytest.raises(TimeoutError, match="aca-log-marker-29"):
        provider().start(launch)
    assert fake.sandboxes == {}


def test_public_server_without_a_token_is_refused_before_any_call(fake: FakeAca) -> None:
    launch = spec()
    del launch.options["host"]  # the default 0.0.0.0, behind anonymous ingress
    with pytest.raises(ConfigError, match=r"needs LaunchSpec.token.*refuses to start without a token") as info:
        provider().start(launch)
    assert "\n" not in str(info.value) and fake.create_attempts == 0
    launch.token = "tok-1"
    provider().check(launch)  # a token, a loopback bind or a command of one's own is fine
    provider().check(spec())
    provider().check(LaunchSpec(env="echo", options={"disk": "ubuntu", "command": "my-server"}))
    with pytest.raises(ConfigError, match="Unknown option 'allow_open'"):
        provider().check(LaunchSpec(env="echo", token="t", options={"disk": "ubuntu", "allow_open": True}))

def test_bad_options_are_refused_before_any_call(fake: FakeAca) -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'dsk'.*disk"):
        provider().start(LaunchSpec(env="echo", options={"dsk": "ubuntu"}))
    with pytest.raises(ConfigError, match="needs a disk image"):
        provider().start(LaunchSpec(env="echo"))
    assert fake.create_attempts == 0


@pytest.mark.parametrize("args", LISTINGS)
def test_cli_listings_never_import_the_sdk(args: tuple[str, ...]) -> None:
    check_cli_imports(args, loaded="openenv_provider_aca.plugin",
                      forbidden=["azure*", "openenv_provider_aca.provider"])
