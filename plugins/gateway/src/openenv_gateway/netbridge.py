"""The gateway as the only address an agent can reach: a network namespace with a one-way bridge.

``CommandHarness(network="gateway-only")`` runs the agent under bubblewrap with its own network
namespace (no interface but its own loopback). Two forwarders join it to the gateway and nothing
else:

* outside, ``UnixBridge`` accepts on a Unix socket in the episode's working directory and pipes each
  connection to the gateway's TCP port;
* inside, this module's ``main`` (the sandbox's first process) listens on the sandbox's
  ``127.0.0.1:<port>``, pipes each connection to that Unix socket, and runs the agent.

So ``OPENAI_BASE_URL=http://127.0.0.1:<port>/v1`` works inside, while every other address, the
host's own loopback services included, is unreachable (there is no route out of the namespace).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["UnixBridge", "bwrap_argv", "main"]

_CHUNK = 65536


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy a → b until a closes, then half-close b (the other direction runs in its own thread)."""
    try:
        while data := a.recv(_CHUNK):
            b.sendall(data)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _join(client: socket.socket, upstream: socket.socket) -> None:
    threads = [threading.Thread(target=_pipe, args=(client, upstream), daemon=True),
               threading.Thread(target=_pipe, args=(upstream, client), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    upstream.close()


class UnixBridge:
    """Accepts on a Unix socket at ``path`` and pipes every connection to ``127.0.0.1:port``."""

    def __init__(self, path: Path, port: int) -> None:
        self.path, self.port = path, port
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._thread = threading.Thread(target=self._serve, daemon=True, name="gateway-unix-bridge")
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            threading.Thread(target=_join, args=(client, upstream), daemon=True).start()

    def close(self) -> None:
        self._server.close()
        self.path.unlink(missing_ok=True)


def bwrap_argv(workdir: Path, sock: Path, port: int, command: list[str]) -> list[str]:
    """bubblewrap around ``command``: the file system read-only but ``workdir`` (the agent's HOME and
    TMPDIR), its own network, PID and IPC namespaces, the bridge as its first process. (No tmpfs on
    /tmp: the interpreter or its virtual environment may live there.)"""
    return ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
            "--bind", str(workdir), str(workdir), "--chdir", str(workdir),
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent",
            sys.executable, "-m", "openenv_gateway.netbridge", "--sock", str(sock), "--port", str(port), "--",
            *command]


def main(argv: list[str] | None = None) -> None:
    """Inside the sandbox: listen on 127.0.0.1 at the given port, pipe each connection to the
    gateway's Unix socket, run the agent, exit with its code."""
    parser = argparse.ArgumentParser(description="the in-sandbox end of the gateway bridge")
    parser.add_argument("--sock", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    # A fresh network namespace has its loopback down; bwrap brings it up, so this bind works.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(64)

    def serve() -> None:
        while True:
            client, _ = listener.accept()
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(args.sock)
            except OSError:
                client.close()
                continue
            threading.Thread(target=_join, args=(client, upstream), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    code = subprocess.call(command, env=os.environ.copy())
    sys.exit(code)


if __name__ == "__main__":
    main()
