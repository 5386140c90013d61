"""Typed action, observation and state of the Jupyter env."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["JupyterAction", "JupyterObservation", "JupyterState"]


class JupyterAction(Action):
    """Run a cell in the session's kernel, restart the kernel, or submit the task's answer."""

    kind: Literal["execute", "restart", "submit"] = Field(
        default="execute", description="execute: run `code`; restart: a fresh kernel (state lost, files kept); "
        "submit: grade `answer` and end the episode")
    code: str = Field(default="", max_length=100_000,
                      description="Python code of the cell (kind=execute; an empty cell does nothing, as in Jupyter)")
    answer: str = Field(default="", max_length=10_000, description="The answer to the task (kind=submit)")
    timeout_s: float = Field(default=10.0, gt=0, le=120, description="Seconds before the cell is interrupted")


class JupyterObservation(Observation):
    """What the last cell printed, returned, displayed or raised, and the task's question."""

    status: str = Field(default="ok", description="ok, error, timeout (interrupted, state kept), restarted "
                        "(state lost), submitted, or ready (after reset)")
    stdout: str = Field(default="", description="What the cell wrote to stdout")
    stderr: str = Field(default="", description="What the cell wrote to stderr, and notes on timeouts/restarts")
    result: str | None = Field(default=None, description="text/plain of the cell's value (Out[n]), if any")
    displays: list[dict[str, str]] = Field(
        default_factory=list, description="Rich outputs: {'text/plain': ..., 'image/png': 'data:image/png;base64,...'}")
    error: dict[str, Any] | None = Field(default=None, description="{ename, evalue, traceback} when the cell raised")
    execution_count: int | None = Field(default=None, description="The cell's number in the kernel (In[n])")
    question: str = Field(default="", description="The task to solve ('' without a task)")
    files: list[str] = Field(default_factory=list, description="Files in the kernel's working folder")
    steps_left: int = Field(default=0, description="Steps left before the episode is truncated")
    truncated: bool = Field(default=False, description="True when the episode ended by the step limit")


class JupyterState(State):
    """Episode id, step count, the task, and the kernel's process and network facts."""

    task_id: str | None = Field(default=None, description="The task being played, if any")
    kernel_pid: int | None = Field(default=None, description="Pid of the kernel (leader of its process group)")
    network: str = Field(default="", description="The kernel's network: none (own namespace) or host")
    done: bool = Field(default=False, description="Whether the episode is over")
