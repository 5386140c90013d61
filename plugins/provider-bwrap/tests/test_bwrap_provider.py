"""The ``bwrap`` provider with real bubblewrap sandboxes and real servers, reached on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import EngineUnavailable, LaunchSpec, ProviderHandle
from openenv.testing.contracts import ProviderContract, play
from openenv.testing.waiting import wait_until
from openenv_provider_bwrap import provider as bwrap_module
from openenv_provider_bwrap.provider import BwrapProvider, parse_size
from openenv_provider_local.process import group_members

HELPERS = Path(__file__).parent / "helpers"


def _kill(handle: ProviderHandle) -> None:
    os.killpg(handle.pgid, signal.SIGKILL)  # type: ignore[attr-defined]


def _start_and_die(*extra: str) -> tuple[str, int]:
    """A server started by a helper process that SIGKILLs itself; returns (id, process group)."""
    out = subprocess.run([sys.executable, str(HELPERS / "start_and_die.py"), "grid_world", *extra],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr
    server_id, pgid = out.stdout.split()
    return server_id, int(pgid)


def _orphan() -> str:
    return _start_and_die()[0]


def _server_pid(handle: Any) -> int:
    """Host pid of the `openenv serve` process inside the sandbox."""
    for pid in group_members(handle.pgid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[1:4] == [b"-m", b"openenv", b"serve"]:
            return pid
    raise AssertionError(f"no server process in group {handle.pgid}")


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
def test_bwrap_provider_contract(usable_bwrap: str) -> None:
    ran = ProviderContract(BwrapProvider(), "grid_world", spec=LaunchSpec(env="grid_world"),
                           kill=_kill, orphan=_orphan, round_trip=play({"move": "right"})).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
def test_a_detached_sandbox_outlives_its_owner_until_gc(usable_bwrap: str) -> None:
    """The owner is dead (and reaped) before we look: a detached server still plays an episode,
    then ``gc`` kills its whole group. (bwrap's --die-with-parent would have killed it with its
    owner, racing the contract's ps/gc calls.)"""
    server_id, pgid = _start_and_die()
    try:
        listed = {info.id: info for info in BwrapProvider().ps(all_owners=True)}
        assert listed[server_id].status == "orphaned"
        assert "--die-with-parent" not in Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
        url = listed[server_id].base_url
        assert url, listed[server_id]
        from openenv.client import GenericEnvClient

        with GenericEnvClient(url).sync() as env:
            env.reset()
            assert env.step({"move": "right"}).observation is not None
        assert [info.id for info in BwrapProvider().gc()] == [server_id]
        assert group_members(pgid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
def test_an_attached_sandbox_dies_with_its_owner(usable_bwrap: str) -> None:
    server_id, pgid = _start_and_die("attached")
    try:
        assert wait_until(lambda: not group_members(pgid), timeout_s=15.0)
        assert server_id not in [info.id for info in BwrapProvider().ps(all_owners=True)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


@pytest.mark.requires_plugins("env-shell", "transport-ws")
def test_the_sandbox_has_no_network_a_read_only_root_and_its_limits(usable_bwrap: str, tmp_path: Path) -> None:
    """Checked from the host on the server process itself, then by an episode of the shell env."""
    outside = socket.socket()
    outside.bind(("127.0.0.1", 0))
    outside.listen(1)
    secret = tmp_path / "secret.txt"  # a host file outside every bound folder
    secret.write_text("host only")
    try:
        handle = BwrapProvider().start(LaunchSpec(env="shell", options={"memory": "3g", "nofile": 512}))
        try:
            pid = _server_pid(handle)
            for ns in ("net", "pid", "user", "uts", "ipc"):
                assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
            limits = Path(f"/proc/{pid}/limits").read_text()
            assert f"{3 << 30}" in next(line for line in limits.splitlines() if "address space" in line)
            assert " 512 " in next(line for line in limits.splitlines() if "open files" in line)
            from openenv.client import GenericEnvClient

            port = outside.getsockname()[1]
            with GenericEnvClient(handle.base_url).sync() as env:
                env.reset(task_id="fix-add")
                probe = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\" "
                         "&& echo CONNECTED || echo NO-NETWORK; hostname; touch /usr/x 2>&1 | head -c 60; "
                         f"cat {secret} > /dev/null 2>&1 || echo NO-SECRET")
                out = env.step({"command": probe}).observation["stdout"]
                assert "NO-NETWORK" in out and "CONNECTED" not in out, out
                assert "openenv-sandbox" in out and "Read-only file system" in out, out
                assert "host only" not in out and "NO-SECRET" in out, out
                fixed = env.step({"command": "sed -i 's/a - b/a + b/' calc.py && python3 test_calc.py"})
                assert fixed.reward == 1.0 and fixed.done, fixed
        finally:
            handle.stop()
    finally:
        outside.close()


@pytest.mark.requires_plugins("env-coding", "transport-ws")
def test_the_coding_env_plays_an_episode(usable_bwrap: str) -> None:
    handle = BwrapProvider().start(LaunchSpec(env="coding"))
    try:
        from openenv.client import GenericEnvClient

        with GenericEnvClient(handle.base_url).sync() as env:
            assert "def add" in env.reset(task_id="add").observation["stdout"]
            ran = env.step({"code": "print(sum([2, 3]))"})
            assert ran.observation["stdout"].strip() == "5" and not ran.done
            graded = env.step({"code": "def add(a, b):\n    return a + b\n", "submit": True})
            assert graded.done and graded.reward == 1.0, graded
    finally:
        handle.stop()
    assert BwrapProvider().ps(all_owners=True) == []


@pytest.mark.requires_plugins("env-grid-world", "transport-ws")
def test_network_true_shares_the_hosts_network(usable_bwrap: str) -> None:
    handle = BwrapProvider().start(LaunchSpec(env="grid_world", options={"network": True}))
    try:
        pid = _server_pid(handle)
        assert os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net")
        assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    finally:
        handle.stop()


def _nothing_left(state_dir: Path) -> None:
    assert BwrapProvider().ps(all_owners=True) == []
    assert not state_dir.exists() or not [p for p in state_dir.iterdir() if not p.name.endswith(".log")]


@pytest.mark.requires_plugins("env-grid-world")
def test_without_bwrap_one_line_names_the_package(monkeypatch: pytest.MonkeyPatch, state_dir: Path) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(EngineUnavailable) as info:
        BwrapProvider().start(LaunchSpec(env="grid_world"))
    message = str(info.value)
    assert "\n" not in message and "Provider 'bwrap'" in message and "apt-get install bubblewrap" in message
    _nothing_left(state_dir)


@pytest.mark.requires_plugins("env-grid-world")
def test_without_user_namespaces_one_line_names_the_sysctl(tmp_path: Path, state_dir: Path) -> None:
    # bwrap's own words on a kernel that refuses unprivileged user namespaces (Debian, sysctl off).
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the "
                    "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(EngineUnavailable) as info:
        BwrapProvider().start(LaunchSpec(env="grid_world", options={"bwrap": str(fake)}))
    message = str(info.value)
    assert "\n" not in message and "kernel.unprivileged_userns_clone=1" in message
    assert "No permissions to creating new namespace" in message
    _nothing_left(state_dir)


def test_bad_options_are_refused_before_anything_starts(state_dir: Path) -> None:
    with pytest.raises(ConfigError, match=r"Unknown option 'netwrok'.*Did you mean 'network'"):
        BwrapProvider().start(LaunchSpec(env="grid_world", options={"netwrok": True}))
    with pytest.raises(ConfigError, match=r"options\['root'\] = 'most'.*'minimal'.*'full'"):
        BwrapProvider().start(LaunchSpec(env="grid_world", options={"root": "most"}))
    with pytest.raises(ConfigError, match=r"options\['memory'\] = 'lots' is not a size"):
        BwrapProvider().start(LaunchSpec(env="grid_world", options={"memory": "lots"}))
    assert parse_size("1.5g") == 3 << 29 and parse_size(4096) == 4096
    _nothing_left(state_dir)


def test_the_sandbox_binds_only_what_the_server_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap_module, "preflight", lambda bwrap=None: "/usr/bin/bwrap")
    argv = BwrapProvider().command(LaunchSpec(env="grid_world", options={"cwd": "/tmp"}),
                                   ["grid_world", "--ready-file", "/srv/x.d/ready"])
    binds = {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert "/" not in binds and "/tmp" not in binds
    # this Python's environment is bound, itself or through a folder above it (a venv inside the
    # checkout, as under nox, is covered by the working tree's bind)
    covering = [b for b in binds if sys.prefix == b or sys.prefix.startswith(b.rstrip("/") + "/")]
    assert covering, (sys.prefix, binds)
    assert argv[argv.index("--bind") + 1] == "/srv/x.d" and "--unshare-net" in argv
    assert argv.index("--tmpfs") < argv.index(covering[0])  # a venv under /tmp is bound over the tmpfs


@pytest.mark.requires_plugins("env-echo", "transport-ws")
def test_serve_refuses_an_fd_that_is_not_a_listening_socket(tmp_path: Path) -> None:
    """`openenv serve --fd` (how the sandbox gets its socket): a wrong descriptor is one clear error."""
    with open(tmp_path / "f", "w") as f:
        out = subprocess.run([sys.executable, "-m", "openenv", "serve", "echo", "--fd", str(f.fileno())],
                             capture_output=True, text=True, timeout=60, pass_fds=(f.fileno(),))
    assert out.returncode == 1 and ("not an open socket" in out.stderr or "not a listening TCP socket" in out.stderr), (
        out.stderr)
