"""One persistent IPython kernel (ipykernel through jupyter-client) in its own process group.

The kernel talks over Unix sockets (jupyter-client's ``ipc`` transport) in a private directory, so
it needs no network at all and runs in a new network namespace where the OS allows it
(``_launch``). ``execute`` collects what one cell printed, returned, displayed or raised; past its
deadline the kernel is interrupted (SIGINT, as Jupyter's stop button) and keeps its state; a kernel
that ignores the interrupt or dies is restarted and the outcome says the state is lost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

from jupyter_client.manager import KernelManager

__all__ = ["KernelLimits", "Outcome", "PersistentKernel"]

_STARTUP_TIMEOUT_S = 60.0
_OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class KernelLimits:
    """What the kernel process may use (rlimits, applied before the kernel starts)."""

    memory_bytes: int = 2 * 1024**3
    cpu_s: int = 600
    open_files: int = 1024
    file_size_bytes: int = 64 * 1024**2
    isolate_network: bool = True
    #: Seconds an interrupted cell gets to stop before the kernel is restarted.
    interrupt_grace_s: float = 5.0


@dataclass
class Outcome:
    """What one cell did. ``status``: ok, error, timeout (interrupted, state kept) or restarted
    (the kernel died or ignored the interrupt and was restarted: state lost)."""

    status: str = "ok"
    stdout: str = ""
    stderr: str = ""
    result: str | None = None
    displays: list[dict[str, str]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    execution_count: int | None = None


def _cap(text: str) -> str:
    return text if len(text) <= _OUTPUT_CAP else text[:_OUTPUT_CAP] + f"\n[... output cut at {_OUTPUT_CAP} chars ...]\n"


def _bundle(data: dict[str, Any]) -> dict[str, str]:
    """A display's text and PNG (as a data URL, the convention the web page shows as a picture)."""
    out: dict[str, str] = {}
    if "text/plain" in data:
        out["text/plain"] = _cap(str(data["text/plain"]))
    if "image/png" in data:
        out["image/png"] = "data:image/png;base64," + str(data["image/png"]).strip()
    return out


class _LimitedKernelManager(KernelManager):
    """Prefixes the kernel's command with the limits launcher (``format_kernel_cmd`` is public)."""

    launch_config: str = "{}"

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        # The cell history (In, Out, _ih, execution counts) lives in the kernel's memory, not in the
        # shared SQLite file under the profile directory: no session reads another's code through
        # `%history -g`, and a cell no longer pays a database write (about 1-2 ms of each call).
        return [sys.executable, "-m", "openenv_env_jupyter._launch", self.launch_config, "--", *cmd,
                "--HistoryManager.hist_file=:memory:"]


class PersistentKernel:
    """A kernel started in ``workdir``; ``close`` kills its whole process group."""

    def __init__(self, workdir: Path, limits: KernelLimits | None = None) -> None:
        self.workdir = workdir
        self.limits = limits or KernelLimits()
        # Socket paths must stay short (108 bytes), so they live in their own short temp folder.
        self._sockets = Path(tempfile.mkdtemp(prefix="oejk-"))
        self._report = self._sockets / "launch.json"
        self.network = "unknown"
        self._km: _LimitedKernelManager | None = None
        self._kc: Any = None
        self.pid: int | None = None
        # An owner that never calls close() (dropped, or the interpreter exiting) still gets the
        # process group killed and the socket folder removed.
        self._leftovers: dict[str, Any] = {"pid": None, "folders": [self._sockets]}
        self._finalizer = weakref.finalize(self, _clean_up, self._leftovers)
        self._start()

    # -- life cycle -------------------------------------------------------------------------------

    def _start(self) -> None:
        km = _LimitedKernelManager(transport="ipc", ip=str(self._sockets / "k"),
                                   connection_file=str(self._sockets / "connection.json"))
        km.launch_config = json.dumps({
            "memory_bytes": self.limits.memory_bytes, "cpu_s": self.limits.cpu_s,
            "open_files": self.limits.open_files, "file_size_bytes": self.limits.file_size_bytes,
            "isolate_network": self.limits.isolate_network, "report": str(self._report),
        })
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        km.start_kernel(cwd=str(self.workdir), env=env)
        self._km = km
        # The local provisioner (the only one used here) knows the kernel's pid.
        pid = getattr(km.provisioner, "pid", None)
        self.pid = int(pid) if pid else None
        self._leftovers["pid"] = self.pid
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=_STARTUP_TIMEOUT_S)
        except RuntimeError as exc:
            self._kill()
            raise RuntimeError(f"the Jupyter kernel did not start: {exc}") from exc
        self._kc = kc
        try:
            self.network = json.loads(self._report.read_text(encoding="utf-8"))["network"]
        except (OSError, ValueError, KeyError):
            self.network = "unknown (the launcher wrote no report)"

    def alive(self) -> bool:
        return self._km is not None and bool(self._km.is_alive())

    def restart(self) -> None:
        """A fresh kernel in the same folder (every variable lost, files kept)."""
        self._kill()
        self._start()

    def close(self) -> None:
        self._kill()
        self._finalizer()

    def _kill(self) -> None:
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            try:
                self._km.shutdown_kernel(now=True)
            except Exception:  # a dead kernel can fail its shutdown request; the group kill below still runs
                pass
            self._km = None
        if self.pid is not None:
            # The kernel leads its own session (start_new_session): this reaps what the code forked.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.pid = self._leftovers["pid"] = None

    # -- running code -----------------------------------------------------------------------------

    def execute(self, code: str, timeout_s: float) -> Outcome:
        """Run one cell; the kernel keeps every name it defines for the next cell."""
        if not self.alive():
            self.restart()
            return Outcome(status="restarted", stderr="The kernel had died; it was restarted and its state is lost.\n")
        kc = self._kc
        msg_id = kc.execute(code, store_history=True, allow_stdin=False)
        outcome, out, err = Outcome(), list[str](), list[str]()
        deadline = time.monotonic() + timeout_s
        interrupted = False
        while True:
            now = time.monotonic()
            if now >= deadline:
                if interrupted:  # the cell ignored SIGINT: only a new kernel ends it
                    self.restart()
                    return Outcome(status="restarted", stdout=_cap("".join(out)), stderr=_cap("".join(err)) +
                                   f"\nThe cell ran past {timeout_s:g}s and ignored the interrupt; the kernel "
                                   "was restarted and its state is lost.\n")
                self._km.interrupt_kernel()  # type: ignore[union-attr]
                interrupted, deadline = True, now + self.limits.interrupt_grace_s
                continue
            try:
                msg = kc.get_iopub_msg(timeout=min(0.25, deadline - now))
            except Empty:
                if not self.alive():
                    self.restart()
                    return Outcome(status="restarted", stdout=_cap("".join(out)), stderr=_cap("".join(err)) +
                                   "\nThe kernel died while running the cell (it exited or was killed); it was "
                                   "restarted and its state is lost.\n")
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue  # output of an earlier, interrupted cell
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                (out if content.get("name") == "stdout" else err).append(content.get("text", ""))
            elif kind == "execute_result":
                outcome.result = _bundle(content.get("data", {})).get("text/plain")
                outcome.displays.append(_bundle(content.get("data", {})))
                outcome.execution_count = content.get("execution_count")
            elif kind == "display_data":
                outcome.displays.append(_bundle(content.get("data", {})))
            elif kind == "error":
                outcome.error = {"ename": content.get("ename", ""), "evalue": content.get("evalue", ""),
                                 "traceback": [_strip_ansi(line) for line in content.get("traceback", [])]}
            elif kind == "execute_input":
                outcome.execution_count = content.get("execution_count")
            elif kind == "status" and content.get("execution_state") == "idle":
                break
        outcome.stdout, outcome.stderr = _cap("".join(out)), _cap("".join(err))
        if interrupted:
            outcome.status = "timeout"
            outcome.stderr += (f"\nThe cell ran past {timeout_s:g}s and was interrupted; the kernel and its "
                               "state are kept.\n")
        elif outcome.error is not None:
            outcome.status = "error"
        return outcome


    def timeline(self, code: str, *, silent: bool = False, timeout_s: float = 30.0) -> dict[str, float]:
        """Where one cell's time goes (a diagnostic; ``bench.catalog2`` prints it): milliseconds
        from sending the execute request to each iopub message's stamp, taken by the kernel when it
        sent the message (``busy``, ``execute_input``, ``stream``, ``idle``...), and ``client`` to
        when this process had read the ``idle`` message. Same host, so one clock."""
        kc = self._kc
        sent = time.time()
        msg_id = kc.execute(code, silent=silent, store_history=not silent, allow_stdin=False)
        stamps: dict[str, float] = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=max(0.01, deadline - time.monotonic()))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status":
                kind = str(msg["content"].get("execution_state"))
            stamps.setdefault(kind, (msg["header"]["date"].timestamp() - sent) * 1e3)
            if kind == "idle":
                stamps["client"] = (time.time() - sent) * 1e3
                return stamps
        raise TimeoutError(f"the kernel did not finish the cell within {timeout_s:g}s")


def _clean_up(leftovers: dict[str, Any]) -> None:
    pid = leftovers["pid"]
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # Reap the kernel (our child) so it does not linger as a zombie; SIGKILL lands at once,
        # the bound only guards against a pid that is not ours to wait for.
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:
                break
            time.sleep(0.01)
    for folder in leftovers["folders"]:
        shutil.rmtree(folder, ignore_errors=True)


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
