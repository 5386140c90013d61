"""Fixtures of the env-author workflow tests: a real OCI registry (Debian's ``docker-registry``)
on 127.0.0.1, started from a config file written here and stopped by its PID."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def _skip_or_fail(reason: str) -> None:
    if os.environ.get("OPENENV_REQUIRE_DOCKER", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_DOCKER is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def docker_engine() -> None:
    try:
        from openenv_provider_docker.testing import engine_skip_reason
    except ImportError:
        _skip_or_fail("openenvkit-provider-docker is not installed")
        return
    reason = engine_skip_reason()
    if reason:
        _skip_or_fail(reason)


@pytest.fixture
def base_image(docker_engine: None) -> str:
    """The base image test builds use (``$OPENENV_BASE_IMAGE`` or the one .ci/docker-setup.sh makes);
    without one the test skips, or fails under ``OPENENV_REQUIRE_DOCKER=1``."""
    from openenv_provider_docker.engine import connect
    from openenv_provider_docker.testing import base_image_for_tests

    base = base_image_for_tests(connect())
    if base is None:
        _skip_or_fail("no base image for test builds: run .ci/docker-setup.sh")
    assert base is not None
    return base


@pytest.fixture
def local_registry(tmp_path: Path, docker_engine: None) -> Iterator[str]:
    """``127.0.0.1:PORT`` of a registry serving from a temp folder for this test only."""
    binary = shutil.which("docker-registry")
    if binary is None:
        _skip_or_fail("Debian's docker-registry is not installed: run .ci/registry-setup.sh")
    from openenv.testing.live import bind_local

    sock = bind_local()
    port = int(sock.getsockname()[1])
    sock.close()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {tmp_path / 'registry-data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n", encoding="utf-8")
    proc = subprocess.Popen([str(binary), "serve", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                log = proc.stderr.read().decode()[-1000:] if proc.stderr else ""
                raise AssertionError(f"docker-registry exited: {log}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("docker-registry did not answer within 20 s") from None
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
