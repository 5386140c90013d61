"""The kernel's provider contract, run over the local providers with the real echo env, and the
``openenv providers ps/gc`` commands against servers those providers started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.testing.contracts import ProviderContract
from openenv_provider_local.local import LocalProvider
from openenv_provider_local.process import group_members
from openenv_provider_local.uv import UvProvider

pytestmark = pytest.mark.usefixtures("no_leftover_processes")

#: Starts a detached server through a provider, prints "<id> <pgid>", then SIGKILLs itself.
START_AND_DIE = (Path(__file__).parents[1] / "plugins" / "provider-local" / "tests" / "helpers"
                 / "start_and_die.py")


@pytest.fixture(autouse=True)
def private_state(cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_STATE_DIR", cli_env["OPENENV_STATE_DIR"])
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)


def make_orphan(provider: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, str(START_AND_DIE), provider, "echo"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == -signal.SIGKILL, out.stderr
    server_id, pgid = out.stdout.split()
    return server_id, int(pgid)


def kill(handle: ProviderHandle) -> None:
    os.killpg(handle.pgid, signal.SIGKILL)  # type: ignore[attr-defined]


def test_local_provider_keeps_the_contract_with_echo() -> None:
    contract = ProviderContract(LocalProvider(), "echo", spec=LaunchSpec(env="echo", token="tk"),
                                kill=kill, orphan=lambda: make_orphan("local")[0])
    assert contract.run() == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs the uv executable")
def test_uv_provider_keeps_the_contract_with_echo() -> None:
    contract = ProviderContract(UvProvider(), "echo",
                                spec=LaunchSpec(env="echo", startup_timeout_s=180),
                                kill=kill, orphan=lambda: make_orphan("uv")[0])
    assert contract.run() == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


def test_providers_cli_shows_and_collects_an_orphan(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    server_id, pgid = make_orphan("local")
    try:
        ps = openenv_cli("providers", "ps", "--provider", "local", "--all-owners", "--json")
        assert ps.returncode == 0, ps.stderr
        rows = {h["id"]: h for h in json.loads(ps.stdout)["handles"]}
        assert rows[server_id]["status"] == "orphaned" and rows[server_id]["env"] == "echo"
        gc = openenv_cli("providers", "gc", "--provider", "local", "--json")
        assert gc.returncode == 0, gc.stderr
        assert [h["id"] for h in json.loads(gc.stdout)["handles"]] == [server_id]
        assert not group_members(pgid)
        ps = openenv_cli("providers", "ps", "--provider", "local", "--all-owners", "--json")
        assert json.loads(ps.stdout)["handles"] == []
    finally:
        if group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)
