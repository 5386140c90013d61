"""``openenv.testing.cli``: the served child process, the clean ``run``, README snippets, registration."""

from __future__ import annotations

import json
import os
import socket
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlparse

import pytest

from openenv.hookspecs import hookimpl
from openenv.testing import (
    ContractError,
    check_registered,
    cli_env,
    exec_snippet,
    make_plugin_module,
    readme_snippets,
    replay_run,
    run_cli,
    run_snippet,
    served_cli,
)


def _refused(url: str) -> bool:
    parts = urlparse(url)
    try:
        socket.create_connection((parts.hostname, parts.port), timeout=2).close()
    except OSError:
        return True
    return False


def test_cli_env_drops_token_and_mode_and_sets_state_columns_and_colour(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TOKEN", "secret")
    monkeypatch.setenv("OPENENV_MODE", "production")
    monkeypatch.setenv("COLUMNS", "40")
    env = cli_env(tmp_path, {"EXTRA": "1"})
    assert "OPENENV_TOKEN" not in env and "OPENENV_MODE" not in env
    assert env["OPENENV_STATE_DIR"] == str(tmp_path) and env["COLUMNS"] == "200" and env["NO_COLOR"] == "1"
    assert env["EXTRA"] == "1" and env["PATH"] == os.environ["PATH"]


def test_run_cli_runs_the_command_line_in_a_child(tmp_path: Path) -> None:
    done = run_cli("envs", "list", tmp_path=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "echo" in done.stdout and "\x1b[" not in done.stdout
    wrong = run_cli("no-such-command", tmp_path=tmp_path, timeout=60)
    assert wrong.returncode != 0 and wrong.stderr


@pytest.mark.requires_plugins("transport-ws")
def test_served_cli_serves_on_loopback_and_kills_the_group_on_exit(tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient

    with served_cli("echo", tmp_path=tmp_path, max_sessions=2, log_level="warning") as url:
        assert url.startswith("http://127.0.0.1:")
        with GenericEnvClient(url).sync() as client:
            assert client.reset().done is False
        [ready] = tmp_path.glob("serve-echo-*/ready.json")
        pid = json.loads(ready.read_text())["pid"]
        os.kill(pid, 0)  # alive while the block runs
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert _refused(url)


@pytest.mark.requires_plugins("env-echo")
def test_served_cli_shows_the_log_when_the_server_does_not_start(tmp_path: Path) -> None:
    with (pytest.raises(RuntimeError, match=r"exited with code [1-9].*its log:\n(.|\n)*ech") as info,
          served_cli("ecoh", tmp_path=tmp_path, timeout=60)):
        pass
    assert "did you mean" in str(info.value).lower()


@pytest.mark.requires_plugins("transport-ws")
def test_served_cli_adds_the_log_to_a_failure_in_the_block(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError) as info, served_cli("echo", tmp_path=tmp_path):
        1 / 0  # noqa: B018
    assert any(note.startswith("`openenv serve echo` log:") for note in info.value.__notes__)


def test_served_cli_refuses_the_flags_it_sets(tmp_path: Path) -> None:
    for flag in ("host", "port", "ready_file"):
        with (pytest.raises(ValueError, match=f"drop the {flag}= argument"),
              served_cli("echo", tmp_path=tmp_path, **{flag: "0.0.0.0"})):
            pass


def test_readme_snippets_exec_and_run(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(textwrap.dedent("""\
        # Title
        ```python
        total = 2 + 3
        ```
        ```bash
        echo not python
        ```
        ```python
        import sys
        print("out", sys.argv[0])
        ```
        """), encoding="utf-8")
    first, second = readme_snippets(readme)
    assert first == "total = 2 + 3\n" and second.startswith("import sys")
    assert exec_snippet(first, filename=readme)["total"] == 5
    with pytest.raises(ZeroDivisionError):
        exec_snippet("1 / 0", filename=readme)
    done = run_snippet(second, timeout=60)
    assert done.returncode == 0 and done.stdout == "out -c\n"
    failed = run_snippet("import warnings; warnings.warn('w'); raise SystemExit(3)", ignore_warnings=True)
    assert failed.returncode == 3 and "UserWarning" not in failed.stderr
    assert readme_snippets(tmp_path / "README.md") == [first, second]


def _plugin(tmp_path: Path, *, name: str = "kit_echo", ref: Any = "openenv.testing.envs:EchoEnv",
            manifest_name: str | None = None, manifest: bool = True) -> Any:
    path = tmp_path / "openenv.yaml"
    path.write_text(f"name: {manifest_name or name}\ndescription: test\n", encoding="utf-8")

    @hookimpl
    def openenv_register_envs(registry: Any) -> None:
        registry.register(name, ref, description="kit echo", manifest=str(path) if manifest else None)

    return make_plugin_module(openenv_register_envs)


def test_check_registered_passes_a_lazy_registration_with_its_manifest(tmp_path: Path) -> None:
    from openenv.testing.envs import EchoEnv

    entry, manifest = check_registered(_plugin(tmp_path), "kit_echo", "openenv.testing.envs:EchoEnv")
    assert entry.load() is EchoEnv and manifest.name == "kit_echo"


def test_check_registered_names_each_broken_promise(tmp_path: Path) -> None:
    from openenv.testing.envs import EchoEnv

    ref = "openenv.testing.envs:EchoEnv"
    with pytest.raises(ContractError, match="does not register an env named 'other'"):
        check_registered(_plugin(tmp_path), "other", ref)
    with pytest.raises(ContractError, match=r"not 'openenv.testing.envs:EchoAction'"):
        check_registered(_plugin(tmp_path), "kit_echo", "openenv.testing.envs:EchoAction")
    with pytest.raises(ContractError, match="register the \"module:Class\" text"):
        check_registered(_plugin(tmp_path, ref=EchoEnv), "kit_echo", ref)
    with pytest.raises(ContractError, match="named 'someone_else', not 'kit_echo'"):
        check_registered(_plugin(tmp_path, manifest_name="someone_else"), "kit_echo", ref)
    with pytest.raises(ContractError, match="without a manifest"):
        check_registered(_plugin(tmp_path, manifest=False), "kit_echo", ref)


class _Listed:
    """Just enough of an env for ``replay_run``: it lists one legal action and records the seeds."""

    def __init__(self) -> None:
        from openenv.testing import EchoAction

        self.action_type = EchoAction
        self.seeds: list[int] = []

    def reset(self, *, seed: int) -> SimpleNamespace:
        self.seeds.append(seed)
        return SimpleNamespace(legal_actions=[{"message": "ok"}], seed=seed)

    def step(self, action: Any) -> SimpleNamespace:
        return SimpleNamespace(legal_actions=[{"message": "ok"}], message=action.message)


def test_replay_run_seeds_like_the_cli_and_refuses_illegal_or_orphan_steps() -> None:
    transcript = ("header\nepisode 1  reset  obs {}\n  step   1  action {\"message\":\"ok\"}  reward 0  done false"
                  "\nepisode 2  reset  obs {}\n  step   1  action {\"message\":\"ok\"}  reward 1  done true\nbye\n")
    env = _Listed()
    replayed = replay_run(transcript, env, seed=7)
    assert env.seeds == [7, 8] and len(replayed) == 4
    assert replayed[1][0].endswith("done false") and replayed[1][1].message == "ok"
    with pytest.raises(ContractError, match="does not list as legal"):
        replay_run(transcript.replace('"ok"}  reward 1', '"no"}  reward 1'), _Listed(), seed=1)
    with pytest.raises(ContractError, match="before any reset"):
        replay_run('  step   1  action {"message":"ok"}  reward 0', _Listed(), seed=1)


@pytest.mark.requires_plugins("provider-local", "transport-ws")
def test_replay_run_replays_a_real_run_of_echo(tmp_path: Path) -> None:
    from openenv_env_echo.env import EchoEnv

    done = run_cli("run", "echo", "--episodes", "2", "--seed", "3", "--max-steps", "2", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    replayed = replay_run(done.stdout, EchoEnv(), seed=3)
    steps = [(line, obs) for line, obs in replayed if line.startswith("  step")]
    assert len(replayed) == 6 and len(steps) == 4
    assert all(f'"echoed_message":{json.dumps(obs.echoed_message)}' in line for line, obs in steps)
