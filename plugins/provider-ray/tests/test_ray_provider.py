"""The ray provider on a real local Ray head (127.0.0.1, 2 CPUs): contract, episodes, faults."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openenv.client import SyncEnvClient
from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing.contracts import ProviderContract
from openenv_provider_ray.provider import RayHandle, RayProvider
from openenv_provider_ray.testing import LocalRayHead, listening_wide

pytestmark = [
    pytest.mark.slow,
    # Every test here serves an env: the echo env and the ws transport must be installed (the
    # integration session has them; the per-package session installs only the kernel and this package).
    pytest.mark.requires_plugins("env-echo", "transport-ws"),
]

HELPERS = Path(__file__).parent / "helpers"
SMALL = {"cpus": 0.25}


def spec(**options: object) -> LaunchSpec:
    return LaunchSpec(env="echo", options={**SMALL, **options}, startup_timeout_s=120.0)


def test_cluster_listens_on_loopback_only(ray_head: LocalRayHead) -> None:
    provider = RayProvider()
    handle = provider.start(spec())
    try:
        import ray

        # Both nodes (the worker node shares the head's temp dir, so pids() has its processes too).
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        pids = ray_head.pids()
        assert pids, "found no process of the Ray head"
        assert listening_wide(pids) == []
        assert handle.base_url.startswith("http://127.0.0.1:")
    finally:
        handle.stop()


def _orphan(ray_head: LocalRayHead) -> str:
    """A detached actor whose driver is then SIGKILLed: its owner is dead, the actor lives on."""
    proc = subprocess.Popen([sys.executable, str(HELPERS / "orphan.py"), ray_head.address],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        orphan_id = proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert orphan_id.startswith("ray-"), f"the orphan's driver printed {orphan_id!r}"
    return orphan_id


def test_provider_contract(ray_head: LocalRayHead) -> None:
    def kill(handle: ProviderHandle) -> None:
        import ray

        assert isinstance(handle, RayHandle)
        ray.kill(handle.actor, no_restart=True)  # behind the provider's back

    ran = ProviderContract(RayProvider(), "echo", spec=spec(), kill=kill,
                           orphan=lambda: _orphan(ray_head), death_timeout_s=30.0).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


def test_from_provider_plays_an_episode(ray_head: LocalRayHead) -> None:
    with SyncEnvClient.from_provider("echo", provider="ray", launch=spec()) as client:
        client.reset()
        result = client.step({"message": "hello ray"})
        assert result.observation["echoed_message"] == "hello ray"
        assert result.reward == pytest.approx(0.9)
    assert RayProvider().ps() == []


def test_openenv_run_two_episodes(ray_head: LocalRayHead) -> None:
    env = dict(os.environ, RAY_ADDRESS=ray_head.address)
    out = subprocess.run([str(Path(sys.executable).with_name("openenv")), "run", "echo", "--provider",
                          "ray", "--episodes", "2", "--max-steps", "3"],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "episode 2  step limit after 3 steps" in out.stdout
    assert len([line for line in out.stdout.splitlines() if line.startswith("  step")]) == 6
    # The CLI's driver is gone, and Ray killed the (non-detached) actor it owned.
    deadline = time.monotonic() + 30
    while RayProvider().ps(all_owners=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert RayProvider().ps(all_owners=True) == []


def test_spread_placement_and_memory_are_declared(ray_head: LocalRayHead) -> None:
    import ray

    handle = RayProvider().start(spec(placement="spread", memory="64Mi"))
    try:
        assert handle.is_running()
        used = ray.available_resources()
        assert used.get("CPU", 0.0) <= ray.cluster_resources()["CPU"] - 0.25
    finally:
        handle.stop()


def test_actor_that_dies_at_start_fails_fast(ray_head: LocalRayHead) -> None:
    runtime_env = {"env_vars": {"PYTHONPATH": str(HELPERS)}}
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="died during start-up"):
        RayProvider().start(LaunchSpec(env="die_at_import:Env", startup_timeout_s=300.0,
                                       options={**SMALL, "runtime_env": runtime_env}))
    assert time.monotonic() - started < 150, "the start waited for its timeout instead of failing"
    assert RayProvider().ps(all_owners=True) == []


def test_server_error_at_start_is_reported(ray_head: LocalRayHead) -> None:
    runtime_env = {"env_vars": {"PYTHONPATH": str(HELPERS)}}
    with pytest.raises(RuntimeError, match="raise_at_import: this env module fails on purpose"):
        RayProvider().start(LaunchSpec(env="raise_at_import:Env", startup_timeout_s=300.0,
                                       options={**SMALL, "runtime_env": runtime_env}))
    assert RayProvider().ps(all_owners=True) == []


def test_actor_that_cannot_fit_on_the_driver_node_fails_at_once(ray_head: LocalRayHead) -> None:
    with pytest.raises(RuntimeError, match=r"cannot be scheduled.*num_cpus=64"):
        RayProvider().start(LaunchSpec(env="echo", startup_timeout_s=300.0, options={"cpus": 64}))
    assert RayProvider().ps(all_owners=True) == []


def test_actor_never_scheduled_times_out_and_is_removed(ray_head: LocalRayHead) -> None:
    with pytest.raises(TimeoutError, match="num_cpus=64"):
        RayProvider().start(LaunchSpec(env="echo", startup_timeout_s=3.0,
                                       options={"cpus": 64, "placement": "spread"}))
    assert RayProvider().ps(all_owners=True) == []


def test_killed_actor_is_reported_not_hung_on(ray_head: LocalRayHead) -> None:
    import ray

    handle = RayProvider().start(spec())
    ray.kill(handle.actor, no_restart=True)
    deadline = time.monotonic() + 30
    while handle.exit_description() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "died" in (handle.exit_description() or "")
    with pytest.raises(RuntimeError, match="died"):
        handle.wait_ready(60.0)
    handle.stop()


def test_token_is_required_by_the_served_env(ray_head: LocalRayHead) -> None:
    from openenv.readiness import http_get

    launch = spec()
    launch.token = "s3cret-token"
    handle = RayProvider().start(launch)
    try:
        assert http_get(handle.base_url, "/capabilities")[0] == 401
        status, _ = http_get(handle.base_url, "/capabilities",
                             headers={"Authorization": "Bearer s3cret-token"})
        assert status == 200
    finally:
        handle.stop()


START_IN_A_FRESH_DRIVER = """
from openenv.interfaces import LaunchSpec
from openenv_provider_ray.provider import RayProvider
try:
    RayProvider().start(LaunchSpec(env="echo", options={"cpus": 0.25}))
except ConnectionError as exc:
    print("ERROR", exc)
"""


@pytest.mark.parametrize("fault", ["wrong token", "nothing listening"])
def test_driver_that_cannot_join_gets_one_line_naming_the_variable(ray_head: LocalRayHead,
                                                                   fault: str) -> None:
    from openenv_provider_ray.testing import free_port

    env = dict(os.environ)
    if fault == "wrong token":
        env["RAY_AUTH_TOKEN"] = "0" * 64
    else:
        env["RAY_ADDRESS"] = f"127.0.0.1:{free_port()}"
    out = subprocess.run([sys.executable, "-c", START_IN_A_FRESH_DRIVER], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("ERROR")]
    assert len(lines) == 1, out.stdout + out.stderr[-2000:]
    assert ("RAY_AUTH_TOKEN" if fault == "wrong token" else "RAY_ADDRESS") in lines[0]
