"""The ``uv`` provider: command construction (fast) and real isolated servers (slow)."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from provider_local_support import HELPERS, TINY, kill_server, needs_ws, start_orphan

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv.testing.contracts import ProviderContract
from openenv_provider_local.uv import UvProvider, dist_source

needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="needs the uv executable")


def test_dist_source_names_a_folder_or_a_pinned_requirement() -> None:
    source = dist_source("openenvkit")
    assert (os.path.isdir(source) and (Path(source) / "pyproject.toml").exists()) or \
        source.startswith("openenv==") or source.startswith("openenv @ ")
    with pytest.raises(ConfigError, match="not installed"):
        dist_source("surely-not-an-installed-dist-xyz")


@needs_ws
@needs_uv
def test_command_installs_kernel_transport_env_and_extras() -> None:
    spec = LaunchSpec(env=TINY, options={"package": "/some/env/pkg", "with": ["numpy<3"],
                                         "python": "3.11"})
    argv = UvProvider().command(spec, ["ENV", "--port", "0"])
    sep = argv.index("--")
    head, tail = argv[:sep], argv[sep + 1:]
    assert head[1:5] == ["run", "--isolated", "--no-project", "--python"] and head[5] == "3.11"
    withs = [head[i + 1] for i, a in enumerate(head) if a in ("--with", "--with-editable")]
    assert withs == [dist_source("openenvkit"), dist_source("openenvkit-transport-ws"), "/some/env/pkg",
                     "numpy<3"]
    flags = {head[i + 1]: a for i, a in enumerate(head) if a in ("--with", "--with-editable")}
    assert flags["/some/env/pkg"] == flags["numpy<3"] == "--with"
    for dist in ("openenvkit", "openenvkit-transport-ws"):
        direct = json.loads(md.distribution(dist).read_text("direct_url.json") or "{}")
        editable = bool((direct.get("dir_info") or {}).get("editable"))
        # An editable install here is editable in the child too: it runs the same source.
        assert flags[dist_source(dist)] == ("--with-editable" if editable else "--with")
    assert tail == ["python", "-m", "openenv", "serve", "ENV", "--port", "0"]


@pytest.mark.requires_plugins("env-echo")
@needs_ws
@needs_uv
def test_default_package_is_the_dist_that_registered_the_env() -> None:
    sources = UvProvider().sources(LaunchSpec(env="echo"))
    assert sources[-1] == dist_source("openenvkit-env-echo")


def test_missing_uv_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setitem(sys.modules, "uv", None)  # the PyPI `uv` package, if installed, is hidden
    with pytest.raises(ConfigError, match="needs the uv executable"):
        UvProvider().command(LaunchSpec(env=TINY, options={"package": "x"}), [])


@pytest.mark.slow
@needs_ws
@needs_uv
def test_uv_provider_contract() -> None:
    spec = LaunchSpec(env=TINY, env_vars={"PYTHONPATH": str(HELPERS)}, startup_timeout_s=180)
    ran = ProviderContract(
        UvProvider(), TINY, spec=spec, kill=kill_server, orphan=lambda: start_orphan("uv")[0],
    ).run()
    assert ran == ["check_lifecycle", "check_stop_after_death", "check_gc_dead_owner"]


@pytest.mark.slow
@pytest.mark.requires_plugins("env-echo")
@needs_ws
@needs_uv
def test_uv_server_runs_in_its_own_environment() -> None:
    from openenv.client import GenericEnvClient
    from openenv_provider_local.process import group_members

    handle = UvProvider().start(LaunchSpec(env="echo", startup_timeout_s=180))
    try:
        with GenericEnvClient(handle.base_url).sync() as env:
            env.reset()
            assert env.step({"message": "isolated"}).reward == pytest.approx(0.8)
        servers = []
        for pid in group_members(handle.pgid):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if cmd[1:3] == [b"-m", b"openenv"]:  # not uv itself, whose argv also says "serve"
                servers.append(cmd[0].decode())
        assert len(servers) == 1
        assert not servers[0].startswith(sys.prefix)  # not our venv's interpreter
    finally:
        handle.stop()
    assert not group_members(handle.pgid)  # uv and the server it ran are both gone
