"""The client side of the sandbox's warm zygote (``_child.py`` run with ``zygote``): it starts the
process and sends it launch requests over a ``SOCK_SEQPACKET`` control socket."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path

from openenv_sandbox import _child
from openenv_sandbox.host import SAFE_PATH

__all__ = ["CHILD_SOURCE"]

#: ``_child.py``'s source, run with ``python -I -c`` (as the zygote, or once per fallback run).
CHILD_SOURCE = Path(_child.__file__).read_text(encoding="utf-8")


class _Zygote:
    """The warm helper process; launch requests go over a ``SOCK_SEQPACKET`` control socket."""

    def __init__(self, python: str, spares: int, isolate_network: bool) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [python, "-I", "-c", CHILD_SOURCE, "zygote", str(theirs.fileno()), str(spares),
                 "1" if isolate_network else "0"],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={"PATH": SAFE_PATH, "LANG": "C.UTF-8"}, start_new_session=True)
        finally:
            theirs.close()
        self.ctrl = ours
        self.lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def launch(self, fds: list[int]) -> None:
        with self.lock:
            socket.send_fds(self.ctrl, [b"run"], fds)

    def close(self) -> None:
        self.ctrl.close()  # the zygote kills every run and exits on EOF
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
