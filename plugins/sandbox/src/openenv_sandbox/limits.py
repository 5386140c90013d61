"""What an execution may use (``Limits``) and what it did (``ExecResult``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ExecResult", "Limits", "TRUNCATION_MARKER"]

#: Appended to a stream cut at ``Limits.output_bytes`` (``{cap}`` is the cap in bytes).
TRUNCATION_MARKER = "\n[... output truncated at {cap} bytes ...]\n"


@dataclass(frozen=True)
class Limits:
    """Per-execution limits. Every field is enforced by the kernel except ``wall_time_s`` (the
    runner kills the whole process group and every process of the slot's uid) and
    ``output_bytes`` (the runner stops reading; further writes fail with ``EPIPE``/``SIGPIPE``)."""

    #: CPU seconds (``RLIMIT_CPU``; ``SIGXCPU`` at the limit, ``SIGKILL`` a second later).
    cpu_time_s: int = 5
    #: Wall-clock seconds before the whole execution is killed.
    wall_time_s: float = 10.0
    #: Address space in bytes (``RLIMIT_AS``): large allocations fail with ``MemoryError``/``ENOMEM``.
    memory_bytes: int = 512 * 1024 * 1024
    #: Processes of the execution's uid (``RLIMIT_NPROC``; one uid per concurrent slot).
    processes: int = 32
    #: Open file descriptors (``RLIMIT_NOFILE``).
    open_files: int = 64
    #: Largest file the execution may write (``RLIMIT_FSIZE``; ``SIGXFSZ`` beyond it).
    file_size_bytes: int = 16 * 1024 * 1024
    #: Bytes kept of stdout and of stderr each; the rest is cut with ``TRUNCATION_MARKER``.
    output_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")
        if self.cpu_time_s != int(self.cpu_time_s):
            raise ValueError(f"Limits.cpu_time_s must be whole seconds (RLIMIT_CPU), got {self.cpu_time_s!r}")

    def rlimits(self) -> dict[str, int]:
        """The kernel-enforced part, as the child applies it."""
        return {"cpu_s": int(self.cpu_time_s), "memory_bytes": int(self.memory_bytes),
                "processes": int(self.processes), "open_files": int(self.open_files),
                "file_size_bytes": int(self.file_size_bytes)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecResult:
    """The outcome of one execution."""

    #: Exit status; ``-N`` when killed by signal N; None if it never started.
    exit_code: int | None
    stdout: str
    stderr: str
    #: The wall-clock limit was reached and the execution killed.
    timed_out: bool = False
    #: What ended it early: ``"wall_time"``, ``"cpu_time"``, ``"file_size"``, ``"output_limit"``,
    #: a signal name (``"SIGKILL"``), ``"sandbox_lost"`` (the zygote died under it), or None.
    killed_by: str | None = None
    duration_s: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    #: The limits in force.
    limits: dict[str, Any] = field(default_factory=dict)
    #: The isolation actually applied to this execution (runner, uid, network, ...).
    boundary: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
