"""Upstream-style env packages served from the command line: ``openenv serve`` and ``uvicorn``.

``openenv serve`` takes the package folder (its ``openenv.yaml`` names the app), a ``module:app``
reference, or the env class; ``uvicorn server.app:app`` run in the folder works as upstream's
README says. Each server is a real subprocess on 127.0.0.1 with a free port.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from layer_helpers import ECHO_DIR, FIXTURES, openenv_serve, start_process

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def echo_round_trip(url: str) -> tuple[str, int]:
    from upstream_style_echo import UpstreamStyleEchoAction, UpstreamStyleEchoEnv

    with UpstreamStyleEchoEnv(base_url=url).sync() as env:
        env.reset(episode_id="cli")
        result = env.step(UpstreamStyleEchoAction(message="from the cli"))
        state = env.state()
    return result.observation.echoed_message, state.step_count


@pytest.mark.slow
def test_serve_a_package_folder(cli_env: dict[str, str], tmp_path: Path) -> None:
    server = openenv_serve(str(ECHO_DIR), cwd=tmp_path, env=cli_env, tmp_path=tmp_path)
    try:
        caps = httpx.get(server.url + "/capabilities").json()
        # env_name and max_concurrent_envs come from the package's own server/app.py
        assert (caps["env"], caps["max_sessions"]) == ("upstream_style_echo", 4)
        assert {"mcp", "rest", "ws"} <= set(caps["transports"])
        assert echo_round_trip(server.url) == ("from the cli", 1)
    finally:
        assert server.stop() == 130, server.output()  # Ctrl-C: clean shutdown


@pytest.mark.slow
def test_command_line_options_override_the_app_s(cli_env: dict[str, str], tmp_path: Path) -> None:
    server = openenv_serve(str(ECHO_DIR), "--max-sessions", "1", "--transport", "ws", "--transport", "rest",
                           cwd=tmp_path, env=cli_env, tmp_path=tmp_path)
    try:
        caps = httpx.get(server.url + "/capabilities").json()
        assert (caps["max_sessions"], sorted(caps["transports"])) == (1, ["rest", "ws"])
        assert httpx.post(server.url + "/mcp", json={}).status_code == 404
    finally:
        assert server.stop() == 130, server.output()  # Ctrl-C: clean shutdown


@pytest.mark.slow
def test_serve_an_mcp_package_and_use_its_tools(cli_env: dict[str, str], tmp_path: Path) -> None:
    server = openenv_serve("./upstream_style_mcp_echo", cwd=FIXTURES, env=cli_env, tmp_path=tmp_path)
    try:
        from upstream_style_mcp_echo import UpstreamStyleMcpEchoEnv

        async def use() -> tuple[object, object]:
            async with UpstreamStyleMcpEchoEnv(base_url=server.url) as env:
                await env.reset()
                return await env.call_tool("echo_message", message="served"), env.tool_path

        assert asyncio.run(use()) == ("served", "jsonrpc")
    finally:
        assert server.stop() == 130, server.output()  # Ctrl-C: clean shutdown


@pytest.mark.slow
def test_serve_the_env_class_by_reference(cli_env: dict[str, str], tmp_path: Path) -> None:
    """Without server/app.py: the action type is read from ``step``'s annotation."""
    ref = "upstream_style_echo.server.upstream_style_echo_environment:UpstreamStyleEchoEnvironment"
    server = openenv_serve(ref, "--max-sessions", "2", cwd=FIXTURES, env=cli_env, tmp_path=tmp_path)
    try:
        ok = httpx.post(server.url + "/step", json={"action": {"message": "typed"}})
        assert ok.status_code == 200 and ok.json()["observation"]["echoed_message"] == "typed"
        bad = httpx.post(server.url + "/step", json={"action": {"msg": "typo"}})
        assert bad.status_code == 422
        assert echo_round_trip(server.url) == ("from the cli", 1)
    finally:
        assert server.stop() == 130, server.output()  # Ctrl-C: clean shutdown


@pytest.mark.slow
def test_serve_module_app_inside_the_folder_like_uvicorn(cli_env: dict[str, str], tmp_path: Path) -> None:
    server = openenv_serve("server.app:app", cwd=ECHO_DIR, env=cli_env, tmp_path=tmp_path)
    try:
        assert echo_round_trip(server.url) == ("from the cli", 1)
    finally:
        assert server.stop() == 130, server.output()  # Ctrl-C: clean shutdown


@pytest.mark.slow
def test_uvicorn_server_app_in_the_package_folder(cli_env: dict[str, str], tmp_path: Path) -> None:
    server = start_process([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
                            "--port", "0"], cwd=ECHO_DIR, env=cli_env,
                           log=tmp_path / "uvicorn.log")
    try:
        assert echo_round_trip(server.url) == ("from the cli", 1)
        one_shot = httpx.post(server.url + "/step", json={"action": {"message": "rest"}})
        assert one_shot.json()["observation"]["echoed_message"] == "rest"
    finally:
        assert server.stop() == 0, server.output()  # uvicorn exits 0 on Ctrl-C


def run_cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openenv", "serve", *args, "--port", "0"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_folder_without_manifest_is_a_usage_error(cli_env: dict[str, str], tmp_path: Path) -> None:
    done = run_cli("./nowhere", cwd=tmp_path, env=cli_env)
    assert done.returncode == 2 and "error: ./nowhere: no such folder." in done.stderr
    (tmp_path / "empty").mkdir()
    done = run_cli("./empty", cwd=tmp_path, env=cli_env)
    assert done.returncode == 2 and "error: no openenv.yaml in empty." in done.stderr


def test_a_bare_folder_name_gets_a_hint(cli_env: dict[str, str]) -> None:
    done = run_cli("upstream_style_echo", cwd=FIXTURES, env=cli_env)
    assert done.returncode == 2
    assert "pass ./upstream_style_echo to serve it" in done.stderr


def test_a_broken_manifest_names_the_file(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "openenv.yaml").write_text("name: [unclosed\n")
    done = run_cli("./pkg", cwd=tmp_path, env=cli_env)
    assert done.returncode == 2 and "openenv.yaml: not valid YAML" in done.stderr


def test_a_foreign_asgi_app_is_refused(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "foreign_app.py").write_text("from starlette.applications import Starlette\napp = Starlette()\n")
    done = run_cli("foreign_app:app", cwd=tmp_path, env=cli_env)
    assert done.returncode == 2
    assert "ASGI app that openenv's create_app did not build" in done.stderr


TRIAGE_DIR = FIXTURES / "upstream_style_triage"


@pytest.mark.slow
@pytest.mark.parametrize(("target", "where"), [
    (str(TRIAGE_DIR), "elsewhere"),                    # openenv serve DIR (absolute)
    ("./upstream_style_triage", "parent"),            # openenv serve ./DIR
    (".", "folder"),                                  # openenv serve . inside the folder
    ("server.app:app", "folder"),                     # upstream's Dockerfile: cd env && uvicorn server.app:app
    ("upstream_style_triage.server.app:app", "parent"),  # the module form
])
def test_serve_an_env_whose_server_imports_dot_dot_models(
        target: str, where: str, cli_env: dict[str, str], tmp_path: Path) -> None:
    """server/ imports ``..models`` with no ``from models import`` fallback, and app.py adds FastAPI
    routes: every form upstream's Dockerfile and docs use serves it."""
    pytest.importorskip("fastapi")
    cwd = {"elsewhere": tmp_path, "parent": FIXTURES, "folder": TRIAGE_DIR}[where]
    env = {k: v for k, v in cli_env.items() if k != "PYTHONPATH"}  # found only the way the form says
    server = openenv_serve(target, cwd=cwd, env=env, tmp_path=tmp_path)
    try:
        caps = httpx.get(server.url + "/capabilities").json()
        assert (caps["env"], caps["max_sessions"]) == ("upstream_style_triage", 4)
        assert httpx.get(server.url + "/safety_rules", params={"case": "mild cough"}).json() == {
            "rules": {"mild cough": "routine"}}
        with httpx.Client(base_url=server.url) as http:
            sid = http.post("/sessions").json()["session_id"]
            headers = {"OpenEnv-Session-Id": sid}
            assert http.post("/reset", json={"seed": 1}, headers=headers).json()["observation"]["case"] == "mild cough"
            step = http.post("/step", json={"action": {"urgency": "routine"}}, headers=headers).json()
            assert (step["observation"]["safe"], step["reward"]) == (True, 1.0)
    finally:
        assert server.stop() == 130, server.output()


def test_a_plain_relative_import_failure_is_not_rewritten(tmp_path: Path) -> None:
    from openenv.cli.serve_cmd import _package_ref_for

    beyond = ImportError("attempted relative import beyond top-level package")
    assert _package_ref_for("server.app:app", beyond, TRIAGE_DIR) == "upstream_style_triage.server.app:app"
    assert _package_ref_for("server.app:app", ImportError("no module named x"), TRIAGE_DIR) is None
    (tmp_path / "server").mkdir()  # a folder that is not a package: nothing to import it as
    assert _package_ref_for("server.app:app", beyond, tmp_path) is None
