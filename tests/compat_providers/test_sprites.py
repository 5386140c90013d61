"""Issue 32: the real ``openenv-sprites`` package from the index, unchanged, as our provider.

Its cloud is replaced by ``sprites_standin`` at the ``sprites-py`` SDK's network boundary (its
``api_base_url``); everything between ``openenv run`` and that API is the package's own code:
``SpritesProvider`` creates a sprite, clones the env's git source into it, installs uv, registers
the server as a service, polls its authenticated ``/health`` and bridges ``/ws`` through its
loopback WebSocket proxy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv_sprites", reason="openenv-sprites is installed only by `nox -s upstream_providers`")
uvicorn = pytest.importorskip("uvicorn")

from sprites_standin import GIT_HOST, SpritesStandin  # noqa: E402

from openenv.core import GenericEnvClient  # noqa: E402

TOKEN = "standin-token-0123456789"


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[SpritesStandin]:
    # The env's source, as a git repository the sprite clones (upstream's Sprites flow starts git sources).
    repo = tmp_path / "echo_env"
    repo.mkdir()
    (repo / "README.md").write_text("echo env source\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True, timeout=30)
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True, timeout=30)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "-m", "init"], check=True, timeout=30)
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    api = SpritesStandin(TOKEN, {"echo_env": repo}, f"http://127.0.0.1:{port}")
    server = uvicorn.Server(uvicorn.Config(api.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the Sprites stand-in did not start"
    try:
        yield api
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _provider_kwargs(api: SpritesStandin, tmp_path: Path) -> dict[str, Any]:
    return {
        "api_base_url": api.base_url,
        "project_dir": str(tmp_path / "sprite" / "srv" / "openenv"),
        "uv_install_dir": str(tmp_path / "sprite" / "opt" / "bin"),
        # The source has no lock of its own: the sprite serves the echo env already installed here.
        "dependency_command": ["{uv_bin}", "--version"],
        "server_command": [sys.executable, "-m", "openenv", "serve", "echo", "--host", "127.0.0.1",
                           "--port", "{port}"],
        "readiness_poll_interval_s": 0.2,
    }


def test_openenv_run_drives_echo_through_sprites(standin: SpritesStandin, tmp_path: Path) -> None:
    kwargs = {"sprites": {**_provider_kwargs(standin, tmp_path), "images": {"echo": f"{GIT_HOST}echo_env"}}}
    env = {**os.environ, "SPRITES_API_TOKEN": TOKEN, "OPENENV_UPSTREAM_PROVIDER_KWARGS": json.dumps(kwargs)}
    listed = subprocess.run([sys.executable, "-m", "openenv", "providers", "list", "--json"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)["providers"]}
    assert "openenv_sprites:SpritesProvider" in json.dumps(rows["sprites"])
    ran = subprocess.run([sys.executable, "-m", "openenv", "run", "echo", "--provider", "sprites",
                          "--episodes", "1", "--json"], env=env, capture_output=True, text=True, timeout=180)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert json.loads(ran.stdout)["episodes"] == 1
    # It went through the package's whole flow against the stand-in, and cleaned up after itself.
    programs = [cmd[0].rsplit("/", 1)[-1] for cmd in standin.commands]
    assert programs[:2] == ["git", "git"] and "curl" in programs and "uv" in programs
    assert len(standin.deleted) == 1 and standin.sprites == {}


def test_from_docker_image_with_a_sprites_provider_instance(standin: SpritesStandin, tmp_path: Path) -> None:
    from openenv_sprites import SpritesProvider

    provider = SpritesProvider(token=TOKEN, **_provider_kwargs(standin, tmp_path))
    env = GenericEnvClient.from_docker_image(f"{GIT_HOST}echo_env", provider=provider).sync()
    try:
        assert env.step({"message": "via sprites"}).observation["echoed_message"] == "via sprites"
    finally:
        env.close()
    assert standin.deleted and provider.sprite is None


def test_a_wrong_token_is_one_clear_error(standin: SpritesStandin, tmp_path: Path) -> None:
    kwargs = {"sprites": {**_provider_kwargs(standin, tmp_path), "images": {"echo": f"{GIT_HOST}echo_env"}}}
    env = {**os.environ, "SPRITES_API_TOKEN": "wrong-token-0000000000",
           "OPENENV_UPSTREAM_PROVIDER_KWARGS": json.dumps(kwargs)}
    ran = subprocess.run([sys.executable, "-m", "openenv", "run", "echo", "--provider", "sprites", "--episodes", "1"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert ran.returncode != 0
    assert "provider 'sprites' (openenv-sprites) failed to start" in ran.stderr
    assert "Authentication failed" in ran.stderr and standin.sprites == {}
