"""Docker container start-to-ready, through the Docker provider's own measurement.

Runs ``python -m openenv_provider_docker.bench N echo docker`` (in a subprocess, bounded in time)
when that module is installed and a Docker engine answers; otherwise says why it was skipped.
The provider's module times ``provider.start(spec)`` until the env answers on ``/ws`` (one
uncounted warm-up start first).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

__all__ = ["docker_start_to_ready"]

MODULE = "openenv_provider_docker.bench"


def docker_start_to_ready(n: int, timeout_s: float) -> dict[str, Any]:
    """``{"median", "min", "max", "n", ...}`` in seconds, or ``{"skipped": reason}``."""
    try:
        found = importlib.util.find_spec(MODULE) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return {"skipped": f"no docker ({MODULE} is not installed)"}
    try:
        from openenv_provider_docker.engine import engine_problem

        problem = engine_problem()
    except Exception as exc:  # the SDK itself missing or broken
        problem = f"{type(exc).__name__}: {exc}"
    if problem:
        return {"skipped": f"no docker ({problem.splitlines()[0][:200]})"}
    try:
        proc = subprocess.run([sys.executable, "-m", MODULE, str(n), "echo", "docker"], capture_output=True,
                              text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"skipped": f"docker measurement exceeded {timeout_s:.0f} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
        return {"skipped": f"docker measurement failed: {tail[0][:300]}"}
    try:
        return dict(json.loads(proc.stdout))
    except ValueError:
        return {"skipped": f"docker measurement printed no JSON: {proc.stdout[-200:]!r}"}
