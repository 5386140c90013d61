"""Upstream openenv 0.10's own Task API client code works against our server (issue 27).

Upstream has no generic Task API client: its ``HarborEnv`` (``openenv.harbor.client``) calls
``/harbor_env/...`` and parses ``HarborTaskRef``. So we serve an upstream-style ``harbor_env``
(``ours_side/harbor_env.py``: upstream's imports, duck-typed task methods returning
``HarborTaskRef`` shapes) and drive it with ``HarborEnv``; and we post upstream's own request
models (``ListTasksRequest`` ...) with ``httpx`` and ``requests`` from upstream's venv to our
routes for a native env (``ours_side/numbers_env.py``). Both servers are started by our CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from compat_harness import HOST, UPSTREAM_SIDE, ServerProcess, _spawn, upstream_env

pytestmark = pytest.mark.compat

OURS_SIDE = Path(__file__).parent / "ours_side"


def _serve(ref: str, name: str, workdir: Path) -> ServerProcess:
    argv = [sys.executable, "-m", "openenv", "serve", ref, "--host", HOST, "--port", "0", "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "OPENENV_MODE")}
    env["OPENENV_DIE_WITH_PARENT"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(OURS_SIDE), env.get("PYTHONPATH")) if p)
    return _spawn(name, argv, workdir, env)


@pytest.fixture(scope="module")
def driven(upstream_python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both servers up, upstream's driver run once against them; its observations."""
    workdir = tmp_path_factory.mktemp("compat-tasks")
    started = [_serve("harbor_env:app", "ours_harbor", workdir), _serve("numbers_env:app", "ours_numbers", workdir)]
    try:
        for server in started:
            server.wait_ready()
        harbor, numbers = started
        done = subprocess.run([upstream_python, str(UPSTREAM_SIDE / "drive_tasks.py"), harbor.url(), numbers.url()],
                              capture_output=True, text=True, timeout=180, env=upstream_env())
        assert done.returncode == 0, done.stderr[-4000:] + "\n" + harbor.log() + numbers.log()
        yield json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        for server in started:
            server.stop()


def test_harbor_env_client_lists_and_fetches_tasks(driven: dict[str, Any]) -> None:
    out = driven["harbor"]
    assert [(s["name"], s["num_tasks"]) for s in out["splits"]] == [("terminal-bench@2.0", 12),
                                                                    ("swebench-verified", 3)]
    assert out["num_tasks"] == {"terminal-bench@2.0": 12, "swebench-verified": 3}
    assert out["task_is_ref"] is True  # parsed by upstream's HarborTaskRef
    assert out["task"] == {"index": 3, "task_id": "terminal-bench@2.0/tb-task-003", "task_name": "tb-task-003",
                           "dataset": "terminal-bench@2.0", "instruction": "Solve tb-task-003."}
    assert [t["index"] for t in out["range"]] == [2, 3, 4] and out["range_all"] == 3
    assert out["capabilities"] == {"datasets": ["swebench-verified", "terminal-bench@2.0"]}  # the MCP tool path


def test_harbor_env_client_sees_structured_errors(driven: dict[str, Any]) -> None:
    out = driven["harbor"]
    unknown = out["unknown_split"]
    assert unknown["status"] == 400 and unknown["body"]["did_you_mean"] == "terminal-bench@2.0"
    assert unknown["body"]["code"] == "VALIDATION_ERROR" and "Did you mean" in unknown["body"]["detail"]
    bad = out["bad_index"]
    assert bad["status"] == 400 and bad["body"]["detail"] == "Invalid task index"  # upstream's text
    assert bad["body"]["num_tasks"] == 12


def test_upstream_request_models_against_a_native_env(driven: dict[str, Any]) -> None:
    out = driven["generic"]
    assert out["environments"] == ["numbers"]
    assert out["splits"] == [{"name": "train", "type": "train", "num_tasks": 10_000},
                             {"name": "test", "type": "test", "num_tasks": 20}]
    assert out["listing"] == {"env_name": "numbers", "n": 10_000,
                              "first": {"id": "train-0", "split": "train", "seed": 0, "data": {"digits": 1}}}
    assert out["num_tasks"] == {"num_tasks": 20}
    assert out["task"]["task"]["id"] == "test-1000004" and out["task"]["task"]["seed"] == 1_000_004
    assert out["range_full"] == 20 and out["range_tail"] == ["train-9998", "train-9999"]
    if out["requests"] is not None:
        assert out["requests"] == {"status": 200, "body": {"num_tasks": 10_000}}


def test_native_env_errors_as_upstream_sees_them(driven: dict[str, Any]) -> None:
    out = driven["generic"]
    assert out["unknown_split"]["status"] == 400 and out["unknown_split"]["body"]["did_you_mean"] == "test"
    assert out["bad_index"]["status"] == 400 and out["bad_index"]["body"]["detail"] == "Invalid task index"
    bad = out["bad_body"]
    assert bad["status"] == 422 and {e["type"] for e in bad["body"]["detail"]} == {"missing", "extra_forbidden"}
    assert out["unknown_env"] == {"status": 404, "body": {"detail": "unknown environment 'nubmers'"}}
