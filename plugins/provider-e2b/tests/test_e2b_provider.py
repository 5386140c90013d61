"""The e2b provider with the real ``e2b`` SDK against a local fake of E2B's API and envd."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from e2b_fake import FakeE2B

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing import LISTINGS, ProviderContract, check_cli_imports, free_port, orphan_from
from openenv_provider_e2b.provider import E2BHandle, E2BProvider

HERE = Path(__file__).parent

#: Tests that serve an env need the echo env and the ws transport (the integration session has them;
#: the per-package session installs only the kernel and this package).
SERVES = pytest.mark.requires_plugins("env-echo", "transport-ws")


def spec(**options: object) -> LaunchSpec:
    # E2B hands out https://<port>-<id>.<domain>; the fake's "sandbox" is this machine, so the
    # server is reached on 127.0.0.1 through the provider's `url` option.
    return LaunchSpec(env="echo", startup_timeout_s=120.0, options={
        "template": "openenv-echo", "host": "127.0.0.1", "port": free_port(),
        "url": "http://127.0.0.1:{port}", **options})


@SERVES
@pytest.mark.slow
def test_provider_contract(fake: FakeE2B) -> None:
    def kill(handle: ProviderHandle) -> None:
        assert isinstance(handle, E2BHandle)
        fake.kill_server(handle.sandbox.sandbox_id)

    def orphan() -> str:
        found = orphan_from([sys.executable, str(HERE / "helpers_orphan.py"), str(free_port())])
        assert found.startswith("e2b-"), found
        return found

    ran = ProviderContract(E2BProvider(), "echo", spec=spec(), kill=kill, orphan=orphan).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert fake.sandboxes == {}


@SERVES
@pytest.mark.slow
def test_sandbox_request_carries_metadata_env_and_template(fake: FakeE2B) -> None:
    launch = spec()
    launch.env_vars = {"SECRET": "hunter2"}
    launch.token = "tok-1"
    handle = E2BProvider().start(launch)
    try:
        record = fake.sandboxes[handle.sandbox.sandbox_id]
        assert record["template"] == "openenv-echo"
        assert record["metadata"]["openenv.id"] == handle.id and record["metadata"]["openenv.env"] == "echo"
        assert record["env"] == {"SECRET": "hunter2", "OPENENV_TOKEN": "tok-1"}
        commands = record["commands"]
        assert len(commands) == 1 and commands[0].startswith("(openenv serve echo --host 127.0.0.1")
        assert "hunter2" not in commands[0] and "tok-1" not in commands[0]  # secrets: env only
        assert [i.id for i in E2BProvider().ps()] == [handle.id]
    finally:
        handle.stop()
    handle.stop()
    assert fake.sandboxes == {} and E2BProvider().ps() == []


def test_missing_api_key_names_the_variable(fake: FakeE2B, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY")
    with pytest.raises(ConfigError, match="set E2B_API_KEY") as info:
        E2BProvider().start(spec())
    assert "\n" not in str(info.value)
    assert fake.create_attempts == 0


def test_wrong_api_key_names_the_variable(fake: FakeE2B, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("E2B_API_KEY", "e2b_not_the_key")
    with pytest.raises(ConfigError, match=r"refused the credentials.*set E2B_API_KEY") as info:
        E2BProvider().start(spec())
    assert "\n" not in str(info.value)
    assert fake.sandboxes == {}


def test_missing_sdk_names_the_package(fake: FakeE2B, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "e2b", None)  # what `import e2b` sees when it is not installed
    with pytest.raises(ConfigError, match=r"e2b provider needs the e2b SDK.*pip install") as info:
        E2BProvider().start(spec())
    assert "\n" not in str(info.value)
    assert fake.create_attempts == 0


def test_sandbox_the_api_refuses_is_one_line_and_leaves_nothing(fake: FakeE2B) -> None:
    fake.refuse_creates = "template 'openenv-echo' not found"
    before = _children()
    with pytest.raises(RuntimeError, match=r"could not create a sandbox from template 'openenv-echo'.*"
                                           r"not found.*options\['template'\]") as info:
        E2BProvider().start(spec())
    assert "\n" not in str(info.value)
    assert fake.create_attempts == 1 and fake.sandboxes == {} and _children() == before


@SERVES
@pytest.mark.slow
def test_rate_limited_create_is_retried_then_succeeds(fake: FakeE2B) -> None:
    fake.rate_limit_creates = 2
    handle = E2BProvider().start(spec())
    handle.stop()
    assert fake.create_attempts == 3


def test_rate_limit_that_does_not_end_is_reported(fake: FakeE2B) -> None:
    fake.rate_limit_creates = 100
    with pytest.raises(RuntimeError, match="rate or quota limits after 3 attempts"):
        E2BProvider().start(spec(create_retries=2))
    assert fake.create_attempts == 3 and fake.sandboxes == {}


def test_sandbox_that_never_becomes_ready_is_killed(fake: FakeE2B) -> None:
    launch = spec(command="sleep 600")
    launch.startup_timeout_s = 4.0
    before = _children()
    with pytest.raises(TimeoutError, match="did not become ready"):
        E2BProvider().start(launch)
    assert fake.sandboxes == {} and len(fake.killed) == 1
    assert _children() == before  # the sandbox's `sleep` went with it


def test_server_that_exits_is_reported_with_its_code_and_its_sandbox_killed(fake: FakeE2B) -> None:
    before = _children()
    with pytest.raises(RuntimeError, match="exited with code 3") as info:
        E2BProvider().start(spec(command="echo failing on purpose; exit 3"))
    assert "failing on purpose" in str(info.value)  # the log tail, read back from the sandbox
    assert fake.sandboxes == {} and len(fake.killed) == 1 and _children() == before


def test_bad_options_are_refused_before_any_call(fake: FakeE2B) -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'templat'.*template"):
        E2BProvider().start(LaunchSpec(env="echo", options={"templat": "x"}))
    with pytest.raises(ConfigError, match="needs a sandbox template"):
        E2BProvider().start(LaunchSpec(env="echo"))
    with pytest.raises(ConfigError, match=r"must contain '\{host\}'"):
        E2BProvider().start(LaunchSpec(env="echo", options={"template": "t", "url": "https://x"}))
    assert fake.create_attempts == 0


@pytest.mark.parametrize("args", LISTINGS)
def test_cli_listings_never_import_the_sdk(args: tuple[str, ...]) -> None:
    check_cli_imports(args, loaded="openenv_provider_e2b.plugin",
                      forbidden=["e2b", "e2b.*", "openenv_provider_e2b.provider"])


def _children() -> set[int]:
    """The live child processes of this process (a command in a fake sandbox is one), from /proc."""
    me, found = str(os.getpid()), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                # /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me and fields[0] != "Z":
                found.add(int(entry.name))
    return found
