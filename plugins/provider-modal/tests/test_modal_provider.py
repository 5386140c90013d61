"""The modal provider with the real ``modal`` SDK against a local fake of Modal's gRPC API."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from modal_fake import FakeModal

from openenv.client import SyncEnvClient
from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing import (
    LISTINGS,
    ProviderContract,
    check_cli_imports,
    free_port,
    orphan_from,
    run_cli,
    wait_until,
)
from openenv_provider_modal.provider import ModalHandle, ModalProvider

HERE = Path(__file__).parent

#: Tests that serve an env need the echo env and the ws transport (the integration session has them;
#: the per-package session installs only the kernel and this package).
SERVES = pytest.mark.requires_plugins("env-echo", "transport-ws")


def spec(*, token: str | None = "tok-1", **options: object) -> LaunchSpec:
    return LaunchSpec(env="echo", token=token, startup_timeout_s=120.0, options={
        "image": "python:3.11", "host": "127.0.0.1", "port": free_port(), **options})


@SERVES
@pytest.mark.slow
def test_provider_contract(fake: FakeModal) -> None:
    def kill(handle: ProviderHandle) -> None:
        assert isinstance(handle, ModalHandle)
        fake.kill_server(handle.sandbox.object_id)

    def orphan() -> str:
        found = orphan_from([sys.executable, str(HERE / "helpers_orphan.py"), str(free_port())])
        assert found.startswith("modal-"), found
        return found

    ran = ProviderContract(ModalProvider(), "echo", spec=spec(), kill=kill, orphan=orphan).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert fake.running() == {}


@SERVES
@pytest.mark.slow
def test_sandbox_request_carries_tags_environment_image_and_no_secret_in_the_command(fake: FakeModal) -> None:
    launch = spec()
    launch.env_vars = {"SECRET": "hunter2"}
    handle = ModalProvider().start(launch)
    try:
        record = fake.sandboxes[handle.sandbox.object_id]
        assert record.tags["openenv.id"] == handle.id and record.tags["openenv.env"] == "echo"
        assert record.tags["openenv.managed"] == "true" and record.tags["openenv.owner"].count(":") == 2
        assert record.env == {"SECRET": "hunter2", "OPENENV_TOKEN": "tok-1"}  # an inline secret source
        argv = list(record.definition.entrypoint_args)
        assert argv[:5] == ["openenv", "serve", "echo", "--host", "127.0.0.1"] and "--allow-open" not in argv
        assert "hunter2" not in " ".join(argv) and "tok-1" not in " ".join(argv)  # secrets: env only
        assert "FROM python:3.11" in fake.images[record.definition.image_id]
        ports = [(p.port, p.unencrypted) for p in record.definition.open_ports.ports]
        assert ports == [(launch.options["port"], False)]  # one encrypted port
        assert record.definition.timeout_secs == 3600
        assert handle.base_url == f"https://127.0.0.1:{record.tunnels[launch.options['port']]}"
        assert "Application startup complete" in handle.logs(50)
    finally:
        handle.stop()
    handle.stop()
    assert fake.terminated == [record.id] and fake.running() == {}


@pytest.mark.parametrize("variable", ["MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"])
def test_missing_token_names_the_variables(fake: FakeModal, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv(variable)
    for call in (lambda: ModalProvider().start(spec()), ModalProvider().ps, ModalProvider().gc):
        with pytest.raises(ConfigError, match="set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET") as info:
            call()
        assert "\n" not in str(info.value)
    assert fake.calls == []


def test_refused_token_names_the_variables(fake: FakeModal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODAL_TOKEN_SECRET", "as-not-the-secret")
    for call in (lambda: ModalProvider().start(spec()), ModalProvider().ps, ModalProvider().gc):
        with pytest.raises(ConfigError, match=r"refused the credentials.*set MODAL_TOKEN_ID and "
                                              "MODAL_TOKEN_SECRET") as info:
            call()
        assert "\n" not in str(info.value)
    assert fake.calls == ["ClientHello"] * 3 and fake.create_attempts == 0


def test_unreachable_api_names_the_variable(fake: FakeModal, monkeypatch: pytest.MonkeyPatch) -> None:
    import modal._utils.async_utils

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    monkeypatch.setenv("MODAL_SERVER_URL", url)
    # The SDK's own knob for its connection retries (18 attempts, about a minute, by default).
    monkeypatch.setattr(modal._utils.async_utils, "RETRY_N_ATTEMPTS_OVERRIDE", 2)
    with pytest.raises(RuntimeError, match=f"Could not reach the Modal API at {url} to connect: check "
                                           "MODAL_SERVER_URL") as info:
        ModalProvider().ps()
    assert "\n" not in str(info.value) and fake.calls == []


@SERVES
@pytest.mark.slow
def test_quota_refusals_are_retried_then_the_sandbox_starts(fake: FakeModal) -> None:
    fake.exhaust_creates = 2
    handle = ModalProvider().start(spec())
    handle.stop()
    assert fake.create_attempts == 3 and len(fake.sandboxes) == 1


def test_quota_refusals_that_do_not_end_are_reported(fake: FakeModal) -> None:
    fake.exhaust_creates = 100
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"quota or rate limits after 3 attempts.*fake quota") as info:
        ModalProvider().start(spec(create_retries=2))
    assert "\n" not in str(info.value)
    assert fake.create_attempts == 3 and fake.sandboxes == {}
    assert time.monotonic() - started >= 0.5 + 1.0  # backed off between the attempts


def test_sandbox_that_never_becomes_ready_is_terminated(fake: FakeModal) -> None:
    launch = spec(command="sleep 600")
    launch.startup_timeout_s = 4.0
    with pytest.raises(TimeoutError, match="did not become ready"):
        ModalProvider().start(launch)
    assert fake.running() == {} and len(fake.terminated) == 1


def test_server_that_exits_is_reported_with_its_logs_and_its_sandbox_ended(fake: FakeModal) -> None:
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*failing on purpose"):
        ModalProvider().start(spec(command="echo failing on purpose; exit 3"))
    assert fake.running() == {}


@SERVES
@pytest.mark.slow
def test_open_server_refuses_to_start_without_a_token(fake: FakeModal) -> None:
    # The tunnel is public: `openenv serve` on all interfaces without a token exits before binding.
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 2.*Refusing to serve on 0\.0\.0\.0 without a token"):
        ModalProvider().start(spec(token=None, host="0.0.0.0"))
    assert fake.running() == {}
    assert "--allow-open" in ModalProvider().command(spec(token=None, allow_open=True))


@SERVES
@pytest.mark.slow
def test_a_sandbox_that_outlives_its_lifetime_is_reported(fake: FakeModal) -> None:
    handle = ModalProvider().start(spec(lifetime_s=10))
    try:
        wait_until(lambda: not handle.is_running(), timeout_s=30, interval_s=0.2)
        assert handle.exit_description() == "timed out (the sandbox outlived options['lifetime_s'])"
    finally:
        handle.stop()


def test_ps_and_gc_before_any_start_find_nothing_and_create_no_app(fake: FakeModal) -> None:
    assert ModalProvider().ps(all_owners=True) == [] and ModalProvider().gc() == []
    assert fake.apps == {}


def test_bad_options_are_refused_before_any_call(fake: FakeModal) -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'imag'.*Did you mean 'image'"):
        ModalProvider().start(LaunchSpec(env="echo", options={"imag": "x"}))
    with pytest.raises(ConfigError, match="needs a registry image"):
        ModalProvider().start(LaunchSpec(env="echo"))
    with pytest.raises(ConfigError, match="lifetime_s'] must be 1 to 86400"):
        ModalProvider().start(spec(lifetime_s=100_000))
    with pytest.raises(ConfigError, match="command'] must be a shell command"):
        ModalProvider().start(spec(command=""))
    assert fake.calls == []


def test_providers_list_shows_modal(tmp_path: Path) -> None:
    done = run_cli("providers", "list", "--json", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "modal" in json.dumps(json.loads(done.stdout))


@pytest.mark.parametrize("args", LISTINGS)
def test_cli_listings_never_import_the_sdk(args: tuple[str, ...]) -> None:
    check_cli_imports(args, loaded="openenv_provider_modal.plugin",
                      forbidden=["modal", "modal.*", "modal_proto*", "modal_version*", "grpclib*", "synchronicity*",
                                 "openenv_provider_modal.provider"])


@SERVES
@pytest.mark.slow
def test_the_client_starts_plays_and_stops_through_the_registry(fake: FakeModal) -> None:
    with SyncEnvClient.from_provider("echo", provider="modal", launch=spec()) as env:
        env.reset()
        assert len(fake.running()) == 1
    assert fake.running() == {} and len(fake.terminated) == 1
