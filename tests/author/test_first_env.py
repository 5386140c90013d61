"""docs/first-env.md, run step by step as a new user would, in a temp folder that is not inside this
checkout nor any uv workspace: a venv with OpenEnv installed from the checkout → init → install →
tests → validate → serve → client episode, and (docker) → push to a real local registry → pull →
run from it.

Every fenced block runs in order, exactly as written: ``bash`` blocks with ``bash -euo pipefail``
in the tutorial's working folder, as one shell session would (a ``cd`` and the environment a block
leaves, e.g. ``source .venv/bin/activate``, carry over to later blocks); the ``bash serve`` block in
the background until its server answers; ``python`` blocks with the interpreter the shell session
finds; ``bash docker`` blocks only in the docker test. The only thing the test supplies is what the
doc asks the reader for: ``OPENENV_SRC``, the path of the clone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "first-env.md"
_BLOCK = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)


def blocks() -> list[tuple[str, str]]:
    return [(m["info"].strip(), m["body"]) for m in _BLOCK.finditer(DOC.read_text(encoding="utf-8"))
            if m["info"].strip().split(" ")[0] in ("bash", "python")]


def _free_port() -> int:
    from openenv.testing.live import bind_local

    sock = bind_local()
    port = int(sock.getsockname()[1])
    sock.close()
    return port


#: Shell variables a session sets itself: not carried from one block to the next.
_SHELL_OWN = {"PWD", "OLDPWD", "SHLVL", "_"}


class Tutorial:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cwd = tmp
        # Nothing of the running session's environment may pick the interpreter or the venv: under
        # nox, UV_PYTHON (and friends) name the session's venv, so `uv pip install` would install the
        # tutorial's package there, where it outlives the test and breaks every later plugin load.
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("VIRTUAL_ENV", "OPENENV_TOKEN", "CONDA_PREFIX", "PYTHONPATH")
                    and not k.startswith("UV_")}
        self.env.update(OPENENV_SRC=str(ROOT), PORT=str(_free_port()),
                        OPENENV_CACHE_DIR=str(tmp / "cache"), PYTHONDONTWRITEBYTECODE="1")
        self.servers: list[subprocess.Popen[bytes]] = []

    def check_outside_any_workspace(self) -> None:
        for folder in [self.tmp, *self.tmp.parents]:
            assert not (folder / "pyproject.toml").exists(), f"{folder} has a pyproject.toml: not a fresh folder"

    def carry(self, dump: str) -> None:
        """Take the folder and the environment a block left (``env -0`` output) for the next block."""
        env: dict[str, str] = {}
        for item in dump.split("\0"):
            key, sep, value = item.partition("=")
            if sep and key == "PWD":
                self.cwd = Path(value)
            elif sep and key and key not in _SHELL_OWN:
                env[key] = value
        self.env = env

    def bash(self, body: str) -> None:
        marker = "__TUTORIAL_ENV__"
        script = f"cd {self.cwd}\n{body}\nprintf '%s' {marker}; env -0\n"
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=self.env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, (f"step failed:\n{body}\nstdout:\n{done.stdout[-3000:]}\n"
                                      f"stderr:\n{done.stderr[-3000:]}")
        self.carry(done.stdout.rsplit(marker, 1)[1])

    def serve(self, body: str) -> None:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", f"cd {self.cwd}\nexec {body.strip()}"],
                                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        self.servers.append(proc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                log = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                raise AssertionError(f"the server exited: {log}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.env['PORT']}/health", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("the tutorial's server did not answer within 60 s")

    def python(self, body: str) -> None:
        python = shutil.which("python", path=self.env["PATH"])  # the activated venv's, as in the shell
        assert python, "no python on the tutorial's PATH"
        done = subprocess.run([python, "-c", body], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"python step failed:\n{done.stdout}\n{done.stderr[-3000:]}"

    def stop(self) -> None:
        for proc in self.servers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # the group of the server this test started
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)

    def run(self, *, docker: bool) -> None:
        for info, body in blocks():
            words = info.split()
            if "docker" in words and not docker:
                continue
            if words[0] == "python":
                self.python(body)
            elif "serve" in words:
                self.serve(body)
            else:
                self.bash(body)


@pytest.fixture
def tutorial(tmp_path: Path) -> Iterator[Tutorial]:
    t = Tutorial(tmp_path)
    t.check_outside_any_workspace()
    try:
        yield t
    finally:
        t.stop()


def test_the_tutorial_has_every_step() -> None:
    infos = [info for info, _ in blocks()]
    assert infos[0] == "bash setup", "the first step installs openenv (the reader has nothing yet)"
    assert infos.count("bash serve") == 1 and "python" in infos and infos.count("bash docker") == 2
    text = "\n".join(body for _, body in blocks())
    for step in ("source .venv/bin/activate", "openenv init", "uv pip install", "pytest", "openenv validate",
                 "openenv serve", "openenv push", "docker pull", "openenv run"):
        assert step in text, step


def test_first_env_tutorial_up_to_a_client_episode(tutorial: Tutorial) -> None:
    tutorial.run(docker=False)
    assert (tutorial.tmp / "my_game" / "src" / "openenv_env_my_game" / "openenv.yaml").is_file()


@pytest.mark.docker
def test_first_env_tutorial_through_a_local_registry(local_registry: str, base_image: str,
                                                     tutorial: Tutorial) -> None:
    from openenv_provider_docker.engine import connect

    client = connect()
    tutorial.env.update(REGISTRY=local_registry, OPENENV_BASE_IMAGE=base_image)
    try:
        tutorial.run(docker=True)
        tags = client.images.get(f"{local_registry}/my_game:0.1.0").tags
        assert f"{local_registry}/my_game:0.1.0" in tags
    finally:  # the images this test made (the local build and the pulled copy)
        for ref in (f"{local_registry}/my_game:0.1.0", "openenv-my_game:0.1.0", "openenv-my_game:latest",
                    "openenv-my_game:build-stage"):
            try:
                client.images.remove(ref)
            except Exception:
                pass
