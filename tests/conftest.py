"""Fixtures of the cross-package tests: the ``openenv`` CLI in a subprocess with a private state
directory, and a guard against processes left behind.

Nothing here is autouse, so suites in sub-folders (compat, docker) are unaffected.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from openenv.testing import restore_default_signals
from openenv.testing import wait_until as kit_wait_until

#: Variables of the caller that must not leak into the CLI under test.
_SCRUB = ("OPENENV_TOKEN", "OPENENV_MODE", "OPENENV_DIE_WITH_PARENT")


# Helpers are handed out as fixtures, not imported: test folders have several conftest modules
# (compat, docker), and `from conftest import ...` would pick whichever was imported first.


@pytest.fixture
def wait_until() -> Callable[..., Any]:
    """The kit's ``openenv.testing.wait_until(predicate, timeout_s=10)``: poll until truthy;
    returns the value (or the last falsy one)."""
    return kit_wait_until


@pytest.fixture
def server_records(state_dir: Path) -> Callable[[], list[dict[str, Any]]]:
    """``server_records()``: the records of servers the CLI under test is running."""
    return lambda: _server_records(state_dir)


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    """Where the local provider of the CLI under test keeps its records."""
    path = tmp_path / "state"
    path.mkdir()
    return path


@pytest.fixture
def cli_env(state_dir: Path) -> dict[str, str]:
    """Environment for ``python -m openenv`` subprocesses: private state dir, wide plain output."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(OPENENV_STATE_DIR=str(state_dir), COLUMNS="200", NO_COLOR="1", TERM="dumb")
    return env


@pytest.fixture
def openenv_cli(cli_env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``openenv_cli(*args, timeout=120, env=None)``: run ``python -m openenv *args`` to completion."""

    def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True,
                              text=True, timeout=timeout, env={**cli_env, **(env or {})})

    return run


#: The README and the pages its tour links to for the rest of it (docs/guide.md, docs/packages.md):
#: their code blocks the tests run as written.
_ROOT = Path(__file__).resolve().parents[1]
README = _ROOT / "README.md"
README_PAGES = (README, _ROOT / "docs" / "guide.md", _ROOT / "docs" / "packages.md")


def readme_python_block(marker: str) -> str:
    """The one ```` ```python ```` block of the README or the guide pages it links to
    (``README_PAGES``) that contains ``marker``."""
    blocks = [b for page in README_PAGES
              for b in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, (f"expected one python block containing {marker!r} in README.md, docs/guide.md "
                             f"and docs/packages.md, found {len(found)}")
    return found[0]


@pytest.fixture
def readme_block() -> Callable[[str], str]:
    """``readme_block(marker)``: the python block of the README (or its guide pages) containing
    ``marker``, verbatim."""
    return readme_python_block


def _server_records(state_dir: Path) -> list[dict[str, Any]]:
    """The local provider's records (one per running server) in ``state_dir``."""
    records = []
    for path in state_dir.glob("*.json"):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # being written or removed right now
    return records


@pytest.fixture
def no_leftover_processes() -> Iterator[None]:
    """Fail the test if it leaves any descendant process running (and kill those)."""
    from openenv_provider_local.process import descendants

    before = set(descendants())
    yield
    left = sorted(set(descendants()) - before)
    if left and kit_wait_until(lambda: not (set(descendants()) - before), timeout_s=5.0):
        left = []
    for pid in left:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    assert not left, f"the test left processes running: {left}"


@pytest.fixture
def serve_proc(cli_env: dict[str, str], tmp_path: Path):  # type: ignore[no-untyped-def]
    """``start(*args)`` runs ``openenv serve echo --port 0 ARGS`` (its own session, log in
    ``tmp_path``) and returns ``(proc, port, log_path)`` once it is ready; every one started is
    killed at the end of the test."""
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], int, Path]:
        ready, log_path = tmp_path / "ready.json", tmp_path / "serve.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--ready-file", str(ready),
             "--log-level", "info", *args],
            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, text=True, env=cli_env,  # noqa: SIM115
            start_new_session=True, preexec_fn=restore_default_signals)
        procs.append(proc)
        info = kit_wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        if not info:
            pytest.fail(f"server did not get ready: {log_path.read_text()}")
        return proc, int(info["port"]), log_path

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def proc_memory() -> Callable[[int, str], int]:
    """``proc_memory(pid, field)``: a ``/proc/<pid>/status`` size field (``VmRSS``, ``VmHWM``) in bytes."""
    def read(pid: int, field: str = "VmRSS") -> int:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field} for pid {pid}")

    return read


@pytest.fixture
def install_generated() -> Iterator[Callable[[Path, str], Path]]:
    """``install_generated(package_dir, dist)``: install a package that ``openenv import`` wrote into
    this venv without its dependencies (the tests' session has them); returns ``package_dir``. Every
    package installed so is uninstalled after the test."""
    uv = shutil.which("uv")
    done: list[str] = []

    def install(package: Path, dist: str) -> Path:
        if uv is None:
            pytest.skip("needs uv to install the generated package")
        subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--python", sys.executable, str(package)],
                       check=True, timeout=120)
        done.append(dist)
        return package

    yield install
    for dist in done:
        subprocess.run([str(uv), "pip", "uninstall", "-q", "--python", sys.executable, dist], timeout=120)


@pytest.fixture
def serve_installed(tmp_path: Path) -> Callable[..., AbstractContextManager[str]]:
    """``with serve_installed(name, timeout_s=60, env=None) as url``: ``openenv serve NAME`` from an
    empty folder and without ``PYTHONPATH`` (an imported env's module must come from its installed
    package, not from where the test wrote it); ``env`` is added to the server's environment."""

    @contextmanager
    def serve(name: str, timeout_s: float = 60.0, env: dict[str, str] | None = None) -> Iterator[str]:
        run_dir = tmp_path / f"serve-{name}"
        run_dir.mkdir()
        ready = run_dir / "ready.json"
        child_env = {k: v for k, v in os.environ.items() if k not in (*_SCRUB, "PYTHONPATH")}
        child_env.update(env or {})
        log = run_dir / "server.log"
        with log.open("wb") as errors:  # a file, not a pipe nobody reads while the server runs
            proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", name, "--port", "0",
                                     "--ready-file", str(ready)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True, env=child_env,
                                    cwd=run_dir, preexec_fn=restore_default_signals)
        try:
            kit_wait_until(lambda: ready.exists() or proc.poll() is not None, timeout_s=timeout_s)
            assert ready.exists(), f"`openenv serve {name}` did not start: {log.read_text(errors='replace')[-4000:]}"
            yield f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            proc.wait(timeout=15)

    return serve
