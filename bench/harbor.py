"""``python -m bench.harbor [--quick]``: Harbor task start-to-ready and grading time, per runtime.

For one task of the terminal suite (default ``csv-sales-summary``), interleaved sample by sample
so that every row sees the same machine load:

* **local start-to-ready**: ``openenv_harbor.box.prepare`` (the Dockerfile's COPY and RUN steps in
  a bubblewrap box) — against a **bare bwrap** run of ``true`` with the same binds (the box's floor);
* **local grading**: ``openenv_harbor.box.grade`` (snapshot copy, fresh box, tests as uid 65534,
  fail-closed reward) of the oracle's workspace — against a **bare bwrap** run of the same
  ``bash /tests/test.sh`` in the oracle's box (no snapshot, same user);
* with a Docker engine: **docker start-to-ready** (``docker.start`` of the task's prebuilt image)
  against a bare ``docker run --rm IMAGE true``, and **docker grading** (commit, fresh container,
  tests) against a bare ``docker run --rm IMAGE bash /tests/test.sh`` with the tests bound;
* with a Kubernetes API server too (``openenv_harbor.k8s.available``; ``$KUBECONFIG``,
  ``$OPENENV_K8S_NAMESPACE``): **k8s start-to-ready** (``k8s.start``: the agent's Pod created and
  running, then deleted) and **k8s grading** (tar of /app through exec, fresh grading Pod as uid
  65534, tests, reward read back, Pod deleted), against the same bare ``docker run`` rows (the node
  runs Pods on the same engine). Without a cluster the rows are skipped with a note.

Prints p50/p95 per row and the ratio to its bare reference; writes JSON (``--out``). Numbers are
reported, never asserted; the exit status is 0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openenv_harbor import docker as docker_rt
from openenv_harbor import k8s as k8s_rt
from openenv_harbor.box import BASE_ENV, box_run, default_grader_uid, grade, prepare, run_oracle
from openenv_harbor.task import load_task

__all__ = ["main", "measure"]

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TASK = ROOT / "suites" / "terminal" / "csv-sales-summary"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _row(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50_ms": round(_pct(samples, 0.5) * 1e3, 1),
            "p95_ms": round(_pct(samples, 0.95) * 1e3, 1)}


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _kubernetes_rows(task: Any, image: str, samples: int, rows: dict[str, list[float]]) -> None:
    rows["k8s_ready"], rows["k8s_grade"] = [], []
    pod = k8s_rt.start(task, image)
    try:
        k8s_rt.copy_in(pod, task.path / "solution", "/solution")
        k8s_rt.exec_command(pod, "bash /solution/solve.sh", 120)
        for _ in range(samples):
            started: list[k8s_rt.Pod] = []
            rows["k8s_ready"].append(_timed(lambda started=started: started.append(  # type: ignore[misc]
                k8s_rt.start(task, image))))
            k8s_rt.close(started[0], remove_image=False)
            rows["k8s_grade"].append(_timed(lambda: k8s_rt.grade(pod)))
    finally:
        k8s_rt.close(pod, remove_image=False)


def measure(task_dir: Path, samples: int, with_docker: bool, with_kubernetes: bool = False) -> dict[str, Any]:
    task = load_task(task_dir)
    rows: dict[str, list[float]] = {k: [] for k in ("local_ready", "bare_bwrap_ready", "local_grade",
                                                     "bare_bwrap_grade")}
    uid = default_grader_uid()
    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as tmp:
        solved_ws = prepare(task, Path(tmp) / "solved")
        run_oracle(task, workspace=solved_ws)  # the oracle's workspace: what grading measures
        shutil.copytree(task.path / "tests", solved_ws.dirs.root / "tests", dirs_exist_ok=True)
        for i in range(samples):
            ready = Path(tmp) / f"ready-{i}"
            rows["local_ready"].append(_timed(lambda ready=ready: prepare(task, ready)))  # type: ignore[misc]
            shutil.rmtree(ready)
            rows["bare_bwrap_ready"].append(_timed(lambda: box_run(solved_ws.dirs, ["true"], "/app", BASE_ENV, 60)))
            rows["local_grade"].append(_timed(lambda: grade(solved_ws, grader_uid=uid)))
            rows["bare_bwrap_grade"].append(_timed(lambda: box_run(solved_ws.dirs, ["bash", "/tests/test.sh"],
                                                                   solved_ws.workdir, solved_ws.env, 60)))
        if with_docker:
            for key in ("docker_ready", "bare_docker_run", "docker_grade", "bare_docker_grade"):
                rows[key] = []
            image = docker_rt.build(task)
            container = docker_rt.start(task, image)
            try:
                subprocess.run(["docker", "cp", f"{task.path / 'solution'}/.", f"{container.id}:/solution"],
                               capture_output=True, check=True)
                docker_rt.exec_command(container, "bash /solution/solve.sh", 120)
                for _ in range(samples):
                    started: list[docker_rt.Container] = []
                    rows["docker_ready"].append(_timed(
                        lambda started=started: started.append(docker_rt.start(task, image))))  # type: ignore[misc]
                    docker_rt.close(started[0], remove_image=False)
                    rows["bare_docker_run"].append(_timed(lambda: subprocess.run(
                        ["docker", "run", "--rm", "--network", "none", image, "true"], capture_output=True)))
                    rows["docker_grade"].append(_timed(lambda: docker_rt.grade(container)))
                    rows["bare_docker_grade"].append(_timed(lambda: subprocess.run(
                        ["docker", "run", "--rm", "--network", "none", "-v", f"{task.path / 'tests'}:/tests:ro",
                         "-w", "/app", image, "bash", "/tests/test.sh"], capture_output=True)))
                if with_kubernetes:
                    _kubernetes_rows(task, image, samples, rows)
            finally:
                docker_rt.close(container, remove_image=not with_kubernetes)
                if with_kubernetes:  # after the kubelet removed the Pods' containers, else it stays untagged
                    k8s_rt.release_image(image)
    result: dict[str, Any] = {"task": task.id, "grader_uid": uid, "rows": {k: _row(v) for k, v in rows.items()}}
    for ours, bare in (("local_ready", "bare_bwrap_ready"), ("local_grade", "bare_bwrap_grade"),
                       ("docker_ready", "bare_docker_run"), ("docker_grade", "bare_docker_grade"),
                       ("k8s_ready", "bare_docker_run"), ("k8s_grade", "bare_docker_grade")):
        if ours in rows:
            result["rows"][ours]["x_bare_p50"] = round(_pct(rows[ours], 0.5) / _pct(rows[bare], 0.5), 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 samples per row instead of 30")
    parser.add_argument("--task", type=Path, default=DEFAULT_TASK, help="a Harbor task folder")
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker rows even when an engine answers")
    parser.add_argument("--no-kubernetes", action="store_true", help="skip the Kubernetes rows even when a cluster "
                        "answers")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "harbor.json", help="JSON output")
    args = parser.parse_args(argv)
    if shutil.which("bwrap") is None:
        print("bench.harbor needs bubblewrap (bash .ci/bwrap-setup.sh)", file=sys.stderr)
        return 0
    with_docker = not args.no_docker and docker_rt.available()
    no_cluster = "--no-kubernetes given" if args.no_kubernetes else k8s_rt.available() if with_docker else "no Docker"
    result = measure(args.task, 5 if args.quick else 30, with_docker, with_kubernetes=not no_cluster)
    print(f"Harbor task {result['task']} (grader uid {result['grader_uid']}):")
    print(f"{'row':20} {'p50 ms':>9} {'p95 ms':>9} {'x bare p50':>11}")
    for name, row in result["rows"].items():
        print(f"{name:20} {row['p50_ms']:9.1f} {row['p95_ms']:9.1f} {row.get('x_bare_p50', ''):>11}")
    if not with_docker:
        print("(no Docker engine: the docker rows were skipped)")
    if no_cluster:
        print(f"(the Kubernetes rows were skipped: {no_cluster})")
        result["kubernetes_skipped"] = no_cluster
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
