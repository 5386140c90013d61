"""Fixtures of the compat suite: upstream's python, and every server of the session.

See ``compat_harness`` for how servers are started and stopped.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_harness import (
    TOKEN,
    UPSTREAM_ENV_VAR,
    ServerProcess,
    Servers,
    spawn_ours,
    spawn_upstream,
)


@pytest.fixture(scope="session")
def upstream_python() -> str:
    """The upstream venv's interpreter; skips the suite when it is not configured."""
    python = os.environ.get(UPSTREAM_ENV_VAR)
    if not python:
        pytest.skip(
            f"{UPSTREAM_ENV_VAR} is not set: run `nox -s compat` (it builds the upstream "
            "openenv==0.10.0 venv and sets it), or point it at a python with openenv==0.10.0."
        )
    if not Path(python).exists():
        pytest.fail(f"{UPSTREAM_ENV_VAR}={python} does not exist; rebuild it with `nox -s compat`.")
    return python


@pytest.fixture(scope="session")
def servers(upstream_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    workdir = tmp_path_factory.mktemp("compat-servers")
    started: list[ServerProcess] = []
    try:
        # launch everything first, then wait: the upstream imports overlap
        upstream = spawn_upstream("upstream", workdir, upstream_python, ["main:4", "single:1"])
        started.append(upstream)
        victim = spawn_upstream("victim", workdir, upstream_python, ["main:2"])
        started.append(victim)
        ours = spawn_ours("ours", workdir, 4)
        started.append(ours)
        ours_single = spawn_ours("ours_single", workdir, 1)
        started.append(ours_single)
        ours_token = spawn_ours("ours_token", workdir, 2, token=TOKEN)
        started.append(ours_token)
        for server in started:
            server.wait_ready()
        yield Servers(ours=ours, ours_single=ours_single, ours_token=ours_token,
                      upstream=upstream, victim=victim, workdir=workdir)
    finally:
        for server in started:
            server.stop()
