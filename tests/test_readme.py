"""The README's code runs as written, with the guide pages its tour links to (docs/guide.md,
docs/packages.md): the quickstart clients against a served echo env, their outputs as the comments
say, and the "Author an environment" example served and played. (The two set-up commands run in
`.ci/run`; the TRL block runs in tests/trl/test_trl_readme.py, where TRL is installed; every block of
every page runs in tests/test_docs_snippets.py. Blocks are found by ``readme_block`` of
tests/conftest.py.) Their shell commands install no dev packages (`uv run --no-dev`) and write only
where the checkout ignores."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from openenv.testing import wait_until

ROOT = Path(__file__).resolve().parents[1]
#: The README and the guide pages that hold the rest of its tour.
README = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "README.md", ROOT / "docs" / "guide.md",
                                                          ROOT / "docs" / "packages.md"))


def _run(code: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                          cwd=tmp_path)


@pytest.fixture
def echo_server(tmp_path: Path):  # type: ignore[no-untyped-def]
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--max-sessions", "8",
                             "--ready-file", str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, timeout_s=15)
        assert ready.exists(), proc.stderr.read().decode() if proc.stderr else "server did not start"
        yield json.loads(ready.read_text())["port"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


@pytest.mark.slow
def test_quickstart_clients_run_as_written(echo_server: int, tmp_path: Path,
                                           readme_block: Callable[[str], str]) -> None:
    code = readme_block("asyncio.run(main())").replace("127.0.0.1:8000", f"127.0.0.1:{echo_server}")
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "hello 0.5"  # the README's comments say what each print shows
    assert "step_count=1" in lines[1]
    assert lines[2] == "0.2"


@pytest.mark.slow
def test_vector_example_runs_as_written(echo_server: int, tmp_path: Path,
                                       readme_block: Callable[[str], str]) -> None:
    # The block continues the quickstart's; it needs the quickstart's imports.
    head = ("import asyncio\nfrom openenv import EnvClient\n"
            "from openenv_env_echo.models import EchoAction, EchoObservation\n")
    code = head + readme_block("env.vector(").replace("127.0.0.1:8000", f"127.0.0.1:{echo_server}")
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[0.1, 0.2, 0.3, 0.4]"]


@pytest.mark.slow
def test_writing_an_environment_example_serves_and_plays(tmp_path: Path,
                                                         readme_block: Callable[[str], str]) -> None:
    env_code = readme_block("class GuessEnv")
    (tmp_path / "guess_env_example.py").write_text(env_code, encoding="utf-8")
    driver = textwrap.dedent('''
        from openenv.client import SyncEnvClient
        from openenv.testing import live_server
        from guess_env_example import GuessEnv, GuessAction, GuessObservation

        with live_server(GuessEnv, max_sessions=4) as server, SyncEnvClient(
                server.url, action_type=GuessAction, observation_type=GuessObservation) as env:
            env.reset(seed=7)
            lo, hi, steps = 0, 100, 0
            while True:
                guess = (lo + hi) // 2
                r = env.step(GuessAction(guess=guess)); steps += 1
                if r.done:
                    break
                lo, hi = (guess + 1, hi) if r.observation.hint == "higher" else (lo, guess - 1)
            print(r.observation.hint, r.reward, env.state().step_count == steps)
    ''')
    done = _run(driver, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "correct 1.0 True"


@pytest.mark.slow
def test_the_rewards_snippet_runs_against_a_server_with_that_rubric(
        tmp_path: Path, readme_block: Callable[[str], str]) -> None:
    """"Rewards from the server": `openenv serve echo --rubric ...` as the README writes it, then
    its Python block; the printed reward and components are the ones its comment shows."""
    command = re.search(r"openenv serve echo --port 8000 (--rubric '[^']+')", README)
    assert command is not None, "the README's rubric serve command"
    rubric = command.group(1).split(" ", 1)[1].strip("'")
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--rubric", rubric,
                             "--ready-file", str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, timeout_s=20)
        assert ready.exists(), proc.stderr.read().decode() if proc.stderr else "server did not start"
        port = json.loads(ready.read_text())["port"]
        done = _run(readme_block("reward_components").replace("127.0.0.1:8000", f"127.0.0.1:{port}"), tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["1.0 {'exact_match': 1.0}"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)


def test_the_train_and_test_task_rows_block_runs_as_written(tmp_path: Path,
                                                            readme_block: Callable[[str], str]) -> None:
    done = _run(readme_block("task_rows("), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["train-1 p000001-train-1"]  # what the block's comment says


@pytest.mark.usefixtures("no_leftover_processes")
def test_many_servers_block_runs(tmp_path: Path, readme_block: Callable[[str], str]) -> None:
    """The "Many servers" block starts two local servers behind an EnvPool, steps, and stops them."""
    env = {**os.environ, "OPENENV_STATE_DIR": str(tmp_path / "state")}
    script = tmp_path / "pool_snippet.py"
    script.write_text(readme_block("async def pool_demo"), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hi 2 servers"


def _shell_commands() -> list[str]:
    """The commands of the README's (and its guide pages') bash blocks, continuation lines joined,
    comments dropped."""
    blocks = re.findall(r"^```(?:bash|sh|shell|console)\n(.*?)^```", README, flags=re.S | re.M)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_readme_uv_commands_install_no_dev_packages() -> None:
    # `uv run` without --no-dev syncs the 20-odd dev packages (pytest, mypy, ...) into the venv first.
    uv_runs = [c for c in _shell_commands() if "uv run" in c]
    assert len(uv_runs) >= 5, "README's bash blocks should show the openenv commands through `uv run`"
    missing = [c for c in uv_runs for part in c.split("uv run")[1:] if not part.lstrip().startswith("--no-dev")]
    assert not missing, f"add --no-dev right after `uv run` in these README commands: {missing}"


def test_readme_commands_write_where_the_checkout_ignores() -> None:
    # Run in a clone, a command's output must not show up as untracked files in `git status`.
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    written = [m for c in _shell_commands() if "openenv" in c
               for m in re.findall(r"(?:-o|--output|--report|--parquet)[ =](\S+)", c)]
    assert written, "README's collect/eval commands name their output paths"
    outside = [p for p in written if Path(p).parts[0] not in ignored]
    assert not outside, f"README writes {outside} into the checkout; write under an ignored folder (runs/)"
