"""Without a Docker engine, ``openenv providers ps``/``gc`` still succeed and say so in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _cli(*args: str, docker_host: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DOCKER_HOST": docker_host}
    env.pop("OPENENV_STRICT_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


@pytest.mark.parametrize("command", ["ps", "gc"])
def test_no_engine_is_one_line_per_provider_and_exit_zero(tmp_path: Path, command: str) -> None:
    host = f"unix://{tmp_path / 'no-docker-here.sock'}"
    result = _cli("providers", command, docker_host=host)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: provider")]
    providers = {line.split("'")[1] for line in notes}
    assert "docker" in providers
    assert len(notes) == len(providers)  # one line per provider
    for line in notes:  # other installed providers (kubernetes, cloud) may add notes of their own
        if line.split("'")[1] in ("docker", "swarm"):
            assert "its engine is not available: No Docker engine answers at " + host in line

    doc = json.loads(_cli("providers", command, "-p", "docker", "--json", docker_host=host).stdout)
    assert doc["errors"] == [] and doc["handles"] == []
    assert [u["provider"] for u in doc["unavailable"]] == ["docker"]
