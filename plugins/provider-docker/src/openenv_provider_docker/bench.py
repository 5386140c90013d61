"""Start-to-ready time of an env server container (for the benchmark suite).

``measure_start_to_ready(n)`` times ``provider.start(spec)`` from the call until it returns, which
includes creating and starting the hardened container, the server's own start-up, ``/health`` and
one ``/ws`` round-trip: everything a client waits for before its first ``reset``. Stopping is not
timed. One warm-up start (first network creation, cold engine caches) is not counted.

Run it: ``python -m openenv_provider_docker.bench [N] [ENV|IMAGE] [PROVIDER]``; it builds the
env's image first (untimed) when it is missing and the env package's sources are in this
workspace. The goal for the echo image is ≤ 1.5 s per start on a 2-core machine.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

from openenv.interfaces import LaunchSpec, Provider

__all__ = ["ensure_env_image", "measure_start_to_ready", "summarize"]


def measure_start_to_ready(
    n: int = 5,
    *,
    env: str = "echo",
    image: str | None = None,
    provider: Provider | str = "docker",
    options: dict[str, Any] | None = None,
    warmup: int = 1,
) -> list[float]:
    """Start and stop ``env`` ``n`` times (after ``warmup`` uncounted starts); returns the seconds
    each start took until ready."""
    if n < 1:
        raise ValueError(f"n={n}: measure at least one start")
    prov = _provider(provider)
    timings: list[float] = []
    for i in range(warmup + n):
        spec = LaunchSpec(env=env, image=image, options=dict(options or {}))
        started = time.perf_counter()
        handle = prov.start(spec)
        elapsed = time.perf_counter() - started
        handle.stop()
        if i >= warmup:
            timings.append(elapsed)
    return timings


def summarize(timings: list[float]) -> dict[str, float]:
    """``{"n", "min", "median", "mean", "max"}`` of a list of timings (seconds)."""
    return {
        "n": len(timings),
        "min": min(timings),
        "median": statistics.median(timings),
        "mean": statistics.fmean(timings),
        "max": max(timings),
    }


def _provider(provider: Provider | str) -> Provider:
    if not isinstance(provider, str):
        return provider
    if provider == "docker":
        from openenv_provider_docker.provider import DockerProvider

        return DockerProvider()
    from openenv.plugins import get_plugin_manager

    loaded = get_plugin_manager().catalog.providers.load(provider)
    return loaded() if isinstance(loaded, type) else loaded  # type: ignore[no-any-return]


def ensure_env_image(env: str) -> str:
    """The derived image of ``env``, built first if it is missing and the env package that
    registers ``env`` lives in this workspace (on ``$OPENENV_BASE_IMAGE`` or the local base)."""
    import io
    from pathlib import Path

    from docker.errors import ImageNotFound
    from rich.console import Console

    from openenv.plugins import get_plugin_manager
    from openenv_provider_docker.build import build_image
    from openenv_provider_docker.context import find_workspace, normalize
    from openenv_provider_docker.engine import connect
    from openenv_provider_docker.naming import derived_image
    from openenv_provider_docker.testing import base_image_for_tests

    tag = derived_image(env)
    client = connect()
    try:
        client.images.get(tag)
        return tag
    except ImageNotFound:
        pass
    pm = get_plugin_manager()
    info = pm.infos.get(pm.catalog.envs.get(env).plugin)
    folder = None
    if info is not None and info.dist:
        for start in (Path.cwd(), Path(__file__).resolve().parent):
            folder = find_workspace(start).get(normalize(info.dist)) or folder
    if folder is None:
        return tag  # nothing to build from: start() will say how to get the image
    build_image(folder, env=env, base_image=base_image_for_tests(client), client=client,
                console=Console(file=io.StringIO()))
    return tag


def main(argv: list[str] | None = None) -> None:
    """Print the summary of ``measure_start_to_ready`` as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    n = int(args[0]) if args else 5
    target = args[1] if len(args) > 1 else "echo"
    provider = args[2] if len(args) > 2 else "docker"
    if ":" not in target and "/" not in target:
        ensure_env_image(target)
    timings = measure_start_to_ready(n, env=target, provider=provider)
    print(json.dumps({"provider": provider, "env": target, **summarize(timings),
                      "timings": [round(t, 4) for t in timings]}, indent=2))


if __name__ == "__main__":
    main()
