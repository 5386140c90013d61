"""Fixtures of the catalog plugin's tests: a plugin manager that sees only this plugin, the
``openenv`` command line as users type it, and small git repositories made in a temp folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from catalog_helpers import git
from typer.testing import CliRunner, Result

import openenv_catalog.plugin
from openenv.plugins import PluginManager, reset_plugin_manager
from openenv.testing.live import bind_local


@pytest.fixture(autouse=True)
def catalog_only() -> Iterator[PluginManager]:
    """The process-wide plugin manager sees this plugin alone (never ambient entry points)."""
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_catalog.plugin, name="catalog")
    reset_plugin_manager(pm)
    yield pm
    reset_plugin_manager(None)


@pytest.fixture
def openenv() -> Callable[..., Result]:
    """Run ``openenv ARGS...`` in-process through the root app (plugin commands mounted as users see them)."""
    from openenv.cli.main import build_app

    def run(*args: str) -> Result:
        return CliRunner().invoke(build_app(list(args)), list(args))

    return run


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[dict[str, str]], Path]:
    """A git repository holding ``files`` (path -> text), committed once."""

    def make(files: dict[str, str]) -> Path:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "user.email", "test@example.invalid")
        git(repo, "config", "user.name", "test")
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text, encoding="utf-8")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "envs")
        return repo

    return make


def _start_registry(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        if os.environ.get("OPENENV_REQUIRE_DOCKER", "").lower() in {"1", "true", "yes"}:
            pytest.fail("OPENENV_REQUIRE_DOCKER is set but docker-registry is not installed", pytrace=False)
        pytest.skip("Debian's docker-registry is not installed: run .ci/registry-setup.sh")
    sock = bind_local()
    port = int(sock.getsockname()[1])
    sock.close()
    folder.mkdir()
    config = folder / "registry.yml"
    config.write_text("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {folder / 'data'}\n  delete:\n    enabled: true\n"
                      f"http:\n  addr: 127.0.0.1:{port}\n", encoding="utf-8")
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is not None:
            log = proc.stderr.read().decode()[-1000:] if proc.stderr else ""
            raise AssertionError(f"docker-registry exited: {log}")
        try:
            httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=2)
            return proc, f"127.0.0.1:{port}"
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError("docker-registry did not answer within 20 s") from None
            time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


@pytest.fixture
def registries(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two registries on 127.0.0.1, each serving from a temp folder, stopped by their PIDs."""
    first, host_a = _start_registry(tmp_path / "a")
    try:
        second, host_b = _start_registry(tmp_path / "b")
        try:
            yield host_a, host_b
        finally:
            _stop(second)
    finally:
        _stop(first)
