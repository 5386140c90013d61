"""The hf_sandbox provider against the local stand-in of Hugging Face Jobs (real SDK, real servers):
the provider contract, the relay's token rule, ps/gc by owner, missing or refused credentials, an
image that does not start, a server that dies — and nothing left behind."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hf_jobs_fake import IMAGE, TOKEN, FakeHFJobs

from openenv.client import GenericEnvClient
from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing.contracts import ProviderContract, play
from openenv_provider_hf_sandbox.provider import HFSandboxHandle, HFSandboxProvider

pytestmark = pytest.mark.requires_plugins("env-echo", "transport-ws")


def spec(**options: Any) -> LaunchSpec:
    token = options.pop("token", None)
    return LaunchSpec(env="echo", image=IMAGE, token=token, startup_timeout_s=60, options=options)


def _orphan() -> str:
    """A sandbox whose owner process was SIGKILLed (started by a child that then dies)."""
    code = ("import sys; from openenv.interfaces import LaunchSpec; "
            "from openenv_provider_hf_sandbox.provider import HFSandboxProvider; "
            f"h = HFSandboxProvider().start(LaunchSpec(env='echo', image={IMAGE!r}, startup_timeout_s=60)); "
            "print(h.id, flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        return proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait(10)


def test_provider_contract(fake: FakeHFJobs) -> None:
    def kill(handle: ProviderHandle) -> None:  # the job ends behind the provider's back
        assert isinstance(handle, HFSandboxHandle)
        fake.jobs[handle.sandbox.id].stop("ERROR")

    ran = ProviderContract(HFSandboxProvider(), "echo", spec=spec(token="tok-1"), kill=kill, orphan=_orphan,
                           round_trip=play({"message": "hi"})).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]
    assert fake.running() == [] and fake.pids() == []


def test_an_episode_through_the_relay_and_the_token_rule(fake: FakeHFJobs) -> None:
    handle = HFSandboxProvider().start(spec(token="secret-1"))
    try:
        assert handle.base_url.startswith("http://127.0.0.1:")
        with GenericEnvClient(handle.base_url, token="secret-1").sync() as env:
            env.reset()
            assert env.step({"message": "through the Jobs proxy"}).observation["echoed_message"] == \
                "through the Jobs proxy"
        with pytest.raises(Exception, match="401"), GenericEnvClient(handle.base_url, token="wrong").sync() as bad:
            bad.reset()
        job = fake.jobs[handle.sandbox.id]
        assert job.labels["openenv-env"] == "echo" and job.labels["openenv-managed"] == "true"
        assert "OPENENV_TOKEN" not in job.env and "secret-1" not in str(job.spec)  # the token stays here
        assert [i.id for i in HFSandboxProvider().ps()] == [handle.id]
    finally:
        handle.stop()
        handle.stop()  # idempotent
    assert fake.running() == [] and fake.pids() == []
    assert HFSandboxProvider().ps() == []


def test_a_server_that_exits_is_reported_with_its_log(fake: FakeHFJobs) -> None:
    with pytest.raises(RuntimeError, match="exited with code") as info:
        HFSandboxProvider().start(spec(command="echo the env is broken >&2; exit 3"))
    assert "the env is broken" in str(info.value)
    assert fake.running() == [] and fake.pids() == []


def test_an_image_that_does_not_start_names_the_image_and_the_job_log(fake: FakeHFJobs) -> None:
    with pytest.raises(RuntimeError, match=r"(?s)nope/missing:1.*pull access denied"):
        HFSandboxProvider().start(LaunchSpec(env="echo", image="nope/missing:1", startup_timeout_s=30))
    assert fake.running() == []


def test_missing_and_refused_credentials(fake: FakeHFJobs, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no stored `hf auth login` token either
    with pytest.raises(ConfigError, match=r"HF_TOKEN.*hf auth login"):
        HFSandboxProvider().start(spec())
    monkeypatch.setenv("HF_TOKEN", TOKEN + "-wrong")
    with pytest.raises(ConfigError, match="refused the token"):
        HFSandboxProvider().start(spec())
    assert fake.jobs == {}


def test_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'flavour'.*flavor"):
        HFSandboxProvider().check(spec(flavour="cpu-basic"))
    with pytest.raises(ConfigError, match="needs an image"):
        HFSandboxProvider().check(LaunchSpec(env="echo"))


def test_provider_contract_with_pooled_sandboxes(fake: FakeHFJobs) -> None:
    def kill(handle: ProviderHandle) -> None:  # the pool's host job ends behind the provider's back
        assert isinstance(handle, HFSandboxHandle)
        fake.jobs[handle.sandbox.host_id].stop("ERROR")

    ran = ProviderContract(HFSandboxProvider(), "echo", spec=spec(pool=True, token="tok-2"), kill=kill,
                           round_trip=play({"message": "pooled"})).run()
    assert ran == ["check_lifecycle", "check_stop_after_death"]
    assert fake.running() == [] and fake.pids() == []


def test_pooled_sandboxes_share_a_host_that_the_last_one_closes(fake: FakeHFJobs) -> None:
    provider = HFSandboxProvider()
    first = provider.start(spec(pool=True, token="t"))
    second = provider.start(spec(pool=True, token="t"))
    try:
        (host,) = fake.running()
        assert host.host and len(host.boxes) == 2  # packed on one host job
        for handle in (first, second):
            with GenericEnvClient(handle.base_url, token="t").sync() as env:
                env.reset()
                assert env.step({"message": handle.id}).observation["echoed_message"] == handle.id
        assert sorted(i.id for i in provider.ps()) == sorted([first.id, second.id])  # its pooled servers
        first.stop()
        assert fake.running() == [host] and len(host.boxes) == 1  # the host serves the other one on
    finally:
        first.stop()
        second.stop()
    assert fake.running() == [] and fake.pids() == []


def test_an_orphaned_pool_host_is_listed_and_collected(fake: FakeHFJobs) -> None:
    code = ("import sys; from openenv.interfaces import LaunchSpec; "
            "from openenv_provider_hf_sandbox.provider import HFSandboxProvider; "
            f"h = HFSandboxProvider().start(LaunchSpec(env='echo', image={IMAGE!r}, startup_timeout_s=60, "
            "options={'pool': True})); print(h.id, flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip().startswith("hfsbx-")
    finally:
        proc.kill()
        proc.wait(10)
    (host,) = fake.running()
    listed = {i.id: i.status for i in HFSandboxProvider().ps(all_owners=True)}
    assert listed == {host.id: "orphaned"}
    assert [i.id for i in HFSandboxProvider().gc()] == [host.id]
    assert fake.running() == [] and fake.pids() == []
