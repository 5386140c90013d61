"""``openenv harbor info|rollout|serve``: a suite described (broken folders named, exit 1), one
task played with the oracle (1.0, exit 0) and the no-op (0.0, exit 1), and the suite served with
its tasks listed over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from openenv_harbor.env import DEMO_SUITE

FIXTURES = Path(DEMO_SUITE)


def _openenv(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True, timeout=timeout)


def test_info_describes_the_tasks_and_names_a_broken_folder(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "fix-add", tmp_path / "fix-add")
    shutil.copytree(FIXTURES / "fix-add", tmp_path / "broken")
    (tmp_path / "broken" / "solution" / "solve.sh").unlink()
    done = _openenv("harbor", "info", str(tmp_path), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    assert [(t["id"], t["split"], t["runtime"]) for t in doc["tasks"]] == [("fix-add", "train", "local")]
    assert "solution/solve.sh: missing" in doc["errors"]["broken"]


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_rollout_plays_one_task_with_the_oracle_and_the_noop() -> None:
    done = _openenv("harbor", "rollout", str(FIXTURES), "fix-add", "--policy", "oracle")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reward"] == 1.0
    done = _openenv("harbor", "rollout", str(FIXTURES), "fix-add", "--policy", "noop")
    assert done.returncode == 1 and json.loads(done.stdout)["reward"] == 0.0
    done = _openenv("harbor", "rollout", str(FIXTURES), "fix-ad")
    assert done.returncode == 2 and "did you mean 'fix-add'" in done.stderr


@pytest.mark.requires_plugins("transport-ws")  # a server needs a transport
def test_serve_serves_the_suite_with_its_tasks(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "harbor", "serve", str(FIXTURES), "--port", "0",
                             "--ready-file", str(ready)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists(), proc.stderr.read().decode() if proc.poll() is not None else "no ready file in 60 s"
        port = json.loads(ready.read_text())["port"]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/harbor/tasks", method="POST",
                                         data=json.dumps({"split": "train"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        assert "fix-add" in json.dumps(body)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_push_dry_run_plans_one_image_per_task() -> None:
    done = _openenv("harbor", "push", str(FIXTURES), "--registry", "127.0.0.1:5000/harbor/", "--dry-run")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)["images"]
    assert row["task"] == "fix-add" and row["image"].startswith("127.0.0.1:5000/harbor/fix-add:")
    bad = _openenv("harbor", "push", str(FIXTURES), "--registry", "http://127.0.0.1:5000/x", "--dry-run")
    assert bad.returncode == 2 and "no scheme" in bad.stderr


def test_an_unknown_runtime_is_refused_with_the_choices() -> None:
    from openenv.errors import ConfigError
    from openenv_harbor.env import HarborEnv

    with pytest.raises(ConfigError, match="harbor runtime 'k8s' is not one of auto, local, docker, kubernetes"):
        HarborEnv(runtime="k8s")
    done = _openenv("harbor", "rollout", str(FIXTURES), "fix-add", "--runtime", "k8s")
    assert done.returncode == 2 and "error: --runtime 'k8s': use one of auto, local, docker, kubernetes" in done.stderr
