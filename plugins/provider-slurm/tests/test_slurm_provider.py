"""The ``slurm`` provider on a real one-node Slurm cluster (``.ci/slurm-setup.sh``)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import EngineUnavailable, LaunchSpec, ProviderHandle
from openenv.readiness import http_get
from openenv.testing.contracts import ProviderContract, play
from openenv_provider_slurm import provider as slurm_module
from openenv_provider_slurm.provider import SlurmProvider, job_resources

HELPERS = Path(__file__).parent / "helpers"
slurm = pytest.mark.slurm


def _kill(handle: ProviderHandle) -> None:
    subprocess.run(["scancel", handle.id], check=True, timeout=20)  # behind the provider's back


def _orphan() -> str:
    out = subprocess.run([sys.executable, str(HELPERS / "start_and_die.py"), "grid_world"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr
    return out.stdout.split()[0]


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
@slurm
def test_slurm_provider_contract(cluster: None) -> None:
    ran = ProviderContract(SlurmProvider(), "grid_world", spec=LaunchSpec(env="grid_world"), kill=_kill,
                           orphan=_orphan, round_trip=play({"move": "right"})).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
@slurm
def test_a_pool_of_servers_in_one_allocation(cluster: None) -> None:
    handle = SlurmProvider().start(LaunchSpec(env="grid_world", options={"pool": 2, "cpus": 1, "memory": "512m"}))
    try:
        assert len(set(handle.base_urls)) == 2 and handle.base_url == handle.base_urls[0]
        for url in handle.base_urls:
            assert http_get(url, "/health", timeout_s=5.0)[0] == 200
        job = subprocess.run(["scontrol", "show", "job", handle.id], capture_output=True, text=True,
                             timeout=20).stdout
        assert "NumCPUs=1" in job and "mem=512M" in job and "JobName=openenv-" in job, job
    finally:
        handle.stop()
    assert SlurmProvider().ps(all_owners=True) == []


@pytest.mark.requires_plugins("env-maze", "transport-ws")
@slurm
def test_the_job_is_sized_by_the_env_manifests_resources(cluster: None) -> None:
    """maze's manifest says ``resources: {cpu: 0.1, memory_mb: 64}``: the job gets 1 whole CPU and
    64 MiB, and the server in it plays an episode."""
    assert slurm_module.manifest_resources("maze")["memory_mb"] == 64
    handle = SlurmProvider().start(LaunchSpec(env="maze"))
    try:
        job = subprocess.run(["scontrol", "show", "job", handle.id], capture_output=True, text=True,
                             timeout=20).stdout
        assert "NumCPUs=1" in job and "mem=64M" in job, job
        play()(handle, LaunchSpec(env="maze"))
    finally:
        handle.stop()
    assert SlurmProvider().ps(all_owners=True) == []


@pytest.mark.requires_plugins("env-maze", "env-grid-world")
def test_options_override_the_manifests_resources_field_by_field() -> None:
    assert job_resources(LaunchSpec(env="maze"))[:2] == (1, 64)  # cpu 0.1 rounds up to a whole CPU
    assert job_resources(LaunchSpec(env="maze", options={"cpus": 2, "memory": "300m"}))[:2] == (2, 300)
    assert job_resources(LaunchSpec(env="maze", options={"memory": "1g"}))[:2] == (1, 1024)
    assert job_resources(LaunchSpec(env="grid_world"))[:2] == (1, 1024)  # no resources: 1 CPU, 1 GiB


@pytest.mark.parametrize(("resources", "expected"), [
    ({"cpu": "2500m", "memory": "1Gi"}, (3, 1024)),
    ({"cpu": 2, "memory": "300M"}, (2, 287)),
    ({"memory_mb": 100.5}, (1, 101)),
])
def test_manifest_quantities_become_whole_cpus_and_mib(monkeypatch: pytest.MonkeyPatch, resources: dict[str, object],
                                                       expected: tuple[int, int]) -> None:
    monkeypatch.setattr(slurm_module, "manifest_resources", lambda env: resources)
    assert job_resources(LaunchSpec(env="grid_world"))[:2] == expected


@pytest.mark.parametrize(("resources", "message"), [
    ({"memory": "1Gi", "memory_mb": 64}, r"gives both resources.memory .* keep one"),
    ({"memory_mb": -3}, r"resources.memory_mb = -3: it must be a positive number of MiB"),
    ({"cpu": "lots"}, r"resources.cpu = 'lots' is not a positive quantity.*options\['cpus'\]"),
    ({"memory": "2 bananas"}, r"resources.memory = '2 bananas' is not a positive quantity.*options\['memory'\]"),
])
def test_bad_manifest_resources_are_refused_before_anything_is_submitted(
        monkeypatch: pytest.MonkeyPatch, resources: dict[str, object], message: str) -> None:
    monkeypatch.setattr(slurm_module, "manifest_resources", lambda env: resources)
    with pytest.raises(ConfigError, match=message):
        SlurmProvider().start(LaunchSpec(env="grid_world"))


@pytest.mark.requires_plugins("env-grid-world")
@slurm
def test_a_job_never_scheduled_is_cancelled_with_squeues_reason(cluster: None) -> None:
    # More CPUs than the node has: accepted by sbatch, never scheduled.
    with pytest.raises(TimeoutError, match=r"not scheduled within .*squeue: PENDING, reason \w+.*cancelled") as info:
        SlurmProvider().start(LaunchSpec(env="grid_world", options={"pending_timeout_s": 2, "cpus": 4096}))
    assert "\n" not in str(info.value)
    assert SlurmProvider().ps(all_owners=True) == []


@slurm
def test_a_job_whose_server_fails_reports_its_log_tail(cluster: None) -> None:
    spec = LaunchSpec(env="crash_at_import:Env", env_vars={"PYTHONPATH": str(HELPERS)}, startup_timeout_s=60)
    with pytest.raises(RuntimeError, match=r"(?s)ended \((COMPLETED|FAILED)\).*boom: this env cannot be imported"):
        SlurmProvider().start(spec)
    assert SlurmProvider().ps(all_owners=True) == []


@pytest.mark.requires_plugins("env-grid-world")
def test_without_slurm_one_line_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineUnavailable, match=r"^Provider 'slurm': .*apt-get install slurm-client[^\n]*$"):
        SlurmProvider().start(LaunchSpec(env="grid_world"))


@pytest.mark.requires_plugins("env-grid-world")
@slurm
def test_a_controller_that_is_down_is_named(cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on: the controller is "down"
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = Path("/etc/slurm/slurm.conf").read_text()
    (tmp_path / "slurm.conf").write_text(conf + f"\nSlurmctldPort={port}\nMessageTimeout=2\n")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    with pytest.raises(EngineUnavailable, match=r"^Provider 'slurm': the Slurm controller does not answer.*start "
                       r"slurmctld[^\n]*$"):
        SlurmProvider().start(LaunchSpec(env="grid_world"))


@pytest.mark.requires_plugins("env-grid-world")
def test_bad_options_are_refused_before_anything_is_submitted() -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'partiton'.*Did you mean 'partition'"):
        SlurmProvider().start(LaunchSpec(env="grid_world", options={"partiton": "gpu"}))
    with pytest.raises(ConfigError, match=r"options\['pool'\] = 0"):
        SlurmProvider().start(LaunchSpec(env="grid_world", options={"pool": 0}))
    with pytest.raises(ConfigError, match=r"options\['memory'\] = 'lots' is not a size"):
        SlurmProvider().start(LaunchSpec(env="grid_world", options={"memory": "lots"}))
