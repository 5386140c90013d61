"""``openenv serve``: a real server in a subprocess, its errors and exit codes."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from openenv.testing import restore_default_signals

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


@pytest.fixture
def start_serve(cli_env: dict[str, str], tmp_path: Path, wait_until):  # type: ignore[no-untyped-def]
    """``start_serve(*args, env=None)``: ``openenv serve *args --port 0`` once it is ready."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None
              ) -> tuple[subprocess.Popen[str], dict[str, object]]:
        ready = tmp_path / "ready.json"
        ready.unlink(missing_ok=True)
        log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", *args, "--port", "0", "--ready-file",
             str(ready), "--log-level", "warning"],
            stdout=log, stderr=subprocess.STDOUT, text=True, env={**cli_env, **(env or {})},
            start_new_session=True, preexec_fn=restore_default_signals,
        )
        started.append(proc)
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        if not info:
            pytest.fail(f"server did not get ready: {(tmp_path / 'serve.log').read_text()}")
        return proc, info

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGINT)
    return proc.wait(timeout=30)


def test_serve_echo_and_round_trip_with_the_typed_client(start_serve) -> None:  # type: ignore[no-untyped-def]
    from openenv_env_echo import EchoAction, EchoEnvClient, EchoObservation

    proc, info = start_serve("echo", "--max-sessions", "2")
    try:
        assert info["host"] == "127.0.0.1" and info["pid"] == proc.pid
        url = f"http://127.0.0.1:{info['port']}"
        caps = httpx.get(url + "/capabilities").json()
        assert caps["env"] == "echo" and caps["max_sessions"] == 2 and "ws" in caps["transports"]
        with EchoEnvClient(url).sync() as env:
            first = env.reset(episode_id="ep-1")
            assert isinstance(first.observation, EchoObservation)
            assert first.observation.echoed_message == "ready" and first.reward == 0.0
            result = env.step(EchoAction(message="Hello"))
            assert result.observation.message_length == 5 and result.reward == pytest.approx(0.5)
            assert result.metadata == {"original_message": "Hello", "step": 1}
            state = env.state()
            assert (state.episode_id, state.step_count) == ("ep-1", 1)
    finally:
        code = stop(proc)
    assert code == 130  # Ctrl-C: clean shutdown, conventional exit status


def test_token_from_the_environment_is_required(start_serve) -> None:  # type: ignore[no-untyped-def]
    proc, info = start_serve("grid_world", env={"OPENENV_TOKEN": "t0ken"})
    try:
        url = f"http://127.0.0.1:{info['port']}"
        assert httpx.get(url + "/health").status_code == 200
        assert httpx.get(url + "/schema").status_code == 401
        schema = httpx.get(url + "/schema", headers={"Authorization": "Bearer t0ken"}).json()
        assert schema["action"]["properties"]["move"]["enum"] == ["up", "down", "left", "right"]
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert b"t0ken" not in cmdline
    finally:
        stop(proc)


def test_only_the_chosen_transports_are_mounted(start_serve) -> None:  # type: ignore[no-untyped-def]
    proc, info = start_serve("echo", "--transport", "ws")
    try:
        caps = httpx.get(f"http://127.0.0.1:{info['port']}/capabilities").json()
        assert caps["transports"] == ["ws"]
    finally:
        stop(proc)


def test_unknown_env_suggests_a_name(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("serve", "grid_wrld")
    assert out.returncode == 2
    assert "Unknown env 'grid_wrld'. Did you mean 'grid_world'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_port_in_use_is_one_clear_line(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = openenv_cli("serve", "echo", "--port", str(port))
    assert out.returncode == 1
    assert f"error: Cannot bind 127.0.0.1:{port}" in out.stderr and "--port 0" in out.stderr
    assert "Traceback" not in out.stderr


def test_rule_violations_exit_2_without_traceback(openenv_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "single_env.py").write_text(textwrap.dedent("""
        from openenv.env import Environment
        from openenv.types import Observation, State

        class SingleEnv(Environment):
            def reset(self, seed=None, episode_id=None, **kw):
                return Observation()
            def step(self, action, timeout_s=None, **kw):
                return Observation()
            @property
            def state(self):
                return State()
    """))
    out = openenv_cli("serve", "single_env:SingleEnv", "--max-sessions", "4",
                      env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 2
    assert "is not marked as SUPPORTS_CONCURRENT_SESSIONS" in out.stderr
    assert "Traceback" not in out.stderr and out.stderr.count("error:") == 1
    out = openenv_cli("serve", "echo", "--workers", "2", "--max-sessions", "1")
    assert out.returncode == 2 and "each worker needs at least one session" in out.stderr
    assert "--max-sessions 2 or more" in out.stderr
    assert "Traceback" not in out.stderr
    out = openenv_cli("serve", "echo", "--transport", "wss")
    assert out.returncode == 2 and "Did you mean 'ws'?" in out.stderr


def test_env_that_fails_to_import_shows_its_error(openenv_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "broken_env.py").write_text("raise ImportError('needs libfoo')\n")
    out = openenv_cli("serve", "broken_env:Env", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 1
    assert "could not load env 'broken_env:Env': ImportError: needs libfoo" in out.stderr
    assert "Traceback" in out.stderr  # the bug is in the env's code: show where
    out = openenv_cli("serve", "no_such_module_q:Env")
    assert out.returncode == 1 and "no module named 'no_such_module_q'" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_serve_and_run_commands_import_nothing_heavy() -> None:
    code = textwrap.dedent("""
        import sys, typer
        from openenv.cli import run_cmd, serve_cmd
        app = typer.Typer()
        serve_cmd.register(app)
        run_cmd.register(app)
        heavy = ("uvicorn", "starlette", "websockets", "openenv.server", "openenv.client",
                 "openenv.sessions", "openenv_provider_local.local", "openenv_env_echo.env")
        print([m for m in heavy if m in sys.modules])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_frame_size_and_ping_settings_reach_the_server(start_serve) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    import websockets

    proc, info = start_serve("echo", "--max-message-mb", "0.01", "--ping-interval", "7", "--ping-timeout", "9")
    try:
        caps = httpx.get(f"http://127.0.0.1:{info['port']}/capabilities").json()
        assert (caps["max_message_bytes"], caps["ping_interval_s"], caps["ping_timeout_s"]) == (10485, 7.0, 9.0)

        async def oversize() -> int | None:
            async with websockets.connect(f"ws://127.0.0.1:{info['port']}/ws", max_size=None) as ws:
                await ws.send(json.dumps({"type": "step", "data": {"message": "x" * 20_000}}))
                try:
                    await asyncio.wait_for(ws.recv(), 10)
                except websockets.ConnectionClosed as exc:
                    return exc.rcvd.code if exc.rcvd else None
                return None

        assert asyncio.run(oversize()) == 1009  # the frame limit is enforced, with the right close code
    finally:
        stop(proc)


def test_a_non_env_target_names_the_fix(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("serve", "openenv_env_echo.models:EchoAction")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "'openenv_env_echo.models:EchoAction' is an Action class, not an Environment subclass" in out.stderr
    assert "Point at your env class instead" in out.stderr


def test_a_package_root_from_openenv_init_is_served(openenv_cli, start_serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`openenv init` lays out src/<pkg>/openenv.yaml with `env:`; serving the package root uses it
    (the upstream default `app: server.app:app` names a module such a package does not have)."""
    made = openenv_cli("init", "tally", "--dir", str(tmp_path / "tally"))
    assert made.returncode == 0, made.stderr
    proc, info = start_serve(str(tmp_path / "tally"))
    schema = httpx.get(f"http://127.0.0.1:{info['port']}/schema", timeout=10).json()
    assert schema["action"]["title"] != "Action"  # the env's own action type, not the bare base
    assert stop(proc) in (0, 130)


def test_a_folder_without_env_names_the_manifest_app_and_suggests_env(openenv_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A manifest with no `env:` falls back to `app:` (upstream's default server.app:app); when that
    does not import, the error says so and suggests declaring `env:`, not just "no module named"."""
    (tmp_path / "game").mkdir()
    (tmp_path / "game" / "openenv.yaml").write_text("spec_version: 1\nname: game\n", encoding="utf-8")
    out = openenv_cli("serve", str(tmp_path / "game"))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    line = " ".join(out.stderr.split())
    assert "no module named 'server'" in line
    assert "declares no `env:`, so serve imported its `app:` (server.app:app, the default)" in line, line
    assert "`env: my_package.env:MyEnv`" in line
    (tmp_path / "game" / "openenv.yaml").write_text("spec_version: 1\nname: game\napp: nowhere_q.app:app\n",
                                                    encoding="utf-8")
    out = openenv_cli("serve", str(tmp_path / "game"))
    line = " ".join(out.stderr.split())
    assert out.returncode == 1 and "its `app:` (nowhere_q.app:app) instead" in line, line


_ENVS_DIR = Path(__file__).resolve().parents[1] / "envs"
_ENV_FOLDERS = sorted(p for p in _ENVS_DIR.iterdir() if (p / "pyproject.toml").is_file())


@pytest.mark.parametrize("folder", _ENV_FOLDERS, ids=[p.name for p in _ENV_FOLDERS])
def test_every_in_repo_env_folder_names_something_serve_can_load(folder: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`openenv serve envs/NAME` resolves its manifest to an env class that imports, or to an
    upstream-style `server.app:app` whose module is really there (never a module the package lacks)."""
    import importlib

    from openenv.cli.serve_cmd import _package_app

    monkeypatch.setattr(sys, "path", list(sys.path))  # _package_app prepends the package's folder
    target, name, _, _ = _package_app(str(folder))
    module, _, attr = target.partition(":")
    if module == "server.app":
        assert any(folder.glob("src/*/server/app.py")), f"{folder.name}: app: {target} names no module"
    else:
        assert hasattr(importlib.import_module(module), attr), target
    assert name


def test_serve_on_a_unix_socket(start_serve, tmp_path: Path, openenv_cli) -> None:  # type: ignore[no-untyped-def]
    """``--uds PATH``: served on an owner-only unix socket (what a sandbox that may not bind TCP
    ports needs); the ready file names it; --uds with --fd is refused."""
    path = tmp_path / "env.sock"
    proc, info = start_serve("echo", "--uds", str(path))
    assert info["uds"] == str(path) and "port" not in info
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path))) as client:
        assert client.get("http://env/health").json() == {"status": "healthy"}
        assert client.get("http://env/capabilities").json()["env"] == "echo"
    assert stop(proc) in (0, 130)  # SIGINT: 130, as for a TCP server
    out = openenv_cli("serve", "echo", "--uds", str(tmp_path / "other.sock"), "--fd", "3")
    assert out.returncode == 2 and "--uds and --fd" in out.stderr
