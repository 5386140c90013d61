"""The pure parts of the ``--workers`` front: the capacity split, the workers' arguments, the merge
of the workers' Prometheus texts. (The front with real processes: tests/test_serve_workers.py.)"""

from __future__ import annotations

import pytest

from openenv_serve_uvicorn.front_http import merge_metrics
from openenv_serve_uvicorn.worker_procs import split_capacity, worker_argv


def test_the_total_is_split_as_evenly_as_it_goes() -> None:
    assert split_capacity(5, 2) == [3, 2]
    assert split_capacity(4, 4) == [1, 1, 1, 1]
    assert split_capacity(None, 3) == [None, None, None]  # each worker keeps the env's default


def test_fewer_sessions_than_workers_is_refused_with_the_fix() -> None:
    fix = r"--max-sessions 1 with --workers 2.*--max-sessions 2 or more, or --workers 1"
    with pytest.raises(ValueError, match=fix):
        split_capacity(1, 2)


def test_a_worker_gets_every_option_but_the_fronts() -> None:
    given = ["./my_env", "--workers", "2", "--port=9000", "--host", "0.0.0.0", "--allow-open", "--token", "t",
             "--max-sessions", "8", "--ready-file", "r.json", "--isolation", "process", "--transport", "ws",
             "--transport", "rest", "--strict-production"]
    assert worker_argv(given) == ["./my_env", "--isolation", "process", "--transport", "ws", "--transport", "rest",
                                  "--strict-production"]


W0 = """# HELP openenv_steps_total Steps.
# TYPE openenv_steps_total counter
openenv_steps_total{env="echo"} 3.0
openenv_steps_created{env="echo"} 1700000000.0
# HELP openenv_step_seconds Step latency.
# TYPE openenv_step_seconds histogram
openenv_step_seconds_bucket{env="echo",le="0.1"} 3.0
openenv_step_seconds_count{env="echo"} 3.0
process_resident_memory_bytes 100.0
"""
W1 = W0.replace(" 3.0", " 4.0").replace("100.0", "200.0")


def test_metrics_get_a_worker_label_and_a_total() -> None:
    text = merge_metrics([(0, W0), (1, W1)])
    lines = text.splitlines()
    assert lines.count("# TYPE openenv_steps_total counter") == 1  # metadata once per family
    assert 'openenv_steps_total{env="echo",worker="0"} 3.0' in lines
    assert 'openenv_steps_total{env="echo",worker="1"} 4.0' in lines
    assert 'openenv_steps_total{env="echo",worker="total"} 7' in lines
    assert 'openenv_step_seconds_bucket{env="echo",le="0.1",worker="total"} 7' in lines
    assert 'openenv_step_seconds_count{env="echo",worker="total"} 7' in lines
    # a sample follows its own family's metadata, totals included
    assert lines.index('openenv_steps_total{env="echo",worker="total"} 7') < lines.index(
        "# TYPE openenv_step_seconds histogram")
    # timestamps and per-process facts do not add up: no total for them
    assert not [line for line in lines if "_created" in line and 'worker="total"' in line]
    assert 'process_resident_memory_bytes{worker="1"} 200.0' in lines
    assert not [line for line in lines if line.startswith("process_") and 'worker="total"' in line]
