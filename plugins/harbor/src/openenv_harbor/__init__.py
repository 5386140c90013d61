"""Harbor-format task suites: load and validate them, play them in boxes, grade in a separate box.

Python API for other tools: ``load_suite(path)``, ``load_task(path)``, ``prepare`` / ``exec_command`` /
``grade`` (the local runtime), ``run_oracle(task)``, ``run_noop(task)``, ``validate_suite(path)``.
"""

from __future__ import annotations

from openenv_harbor.box import Grade, Workspace, exec_command, grade, prepare, read_reward, run_noop, run_oracle
from openenv_harbor.task import HarborTask, HarborTaskError, Suite, load_suite, load_task

__all__ = ["Grade", "HarborTask", "HarborTaskError", "Suite", "Workspace", "exec_command", "grade", "load_suite",
           "load_task", "prepare", "read_reward", "run_noop", "run_oracle"]
