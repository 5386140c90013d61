"""``SpawnProvider``: each env server is a child process in its own process group.

The promises (``openenv.interfaces.Provider``), all checked by ``openenv.testing.ProviderContract``:
``start`` returns a handle that is already ready (it calls ``wait_ready``) and cleans up on every
failure; ``stop`` is idempotent and works after the server died; ``ps`` shows what is running;
``gc`` removes what is dead. The token reaches the server through its environment, never argv.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle, owner_id
from openenv.readiness import wait_until_ready

__all__ = ["SpawnHandle", "SpawnProvider"]


class SpawnHandle(ProviderHandle):
    """One child ``openenv serve`` process."""

    def __init__(self, proc: subprocess.Popen[bytes], server_id: str, base_url: str, log: Path,
                 spec: LaunchSpec) -> None:
        super().__init__(provider="spawn", id=server_id, base_url=base_url)  # the base checks its fields
        self.proc, self.log, self.spec = proc, log, spec
        self._stopped = False

    def wait_ready(self, timeout_s: float) -> None:
        """Ready already when ``start`` returns; checking again costs one probe."""
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self.spec.token, exited=self._exited,
                         log_tail=self.logs, log_source=str(self.log), what=f"spawn server {self.id}")

    def _exited(self) -> str | None:
        code = self.proc.poll()
        return None if code is None else f"exited with code {code}"

    def is_running(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)  # the whole group: the server and anything it started
            except ProcessLookupError:
                break
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                continue
        self.proc.wait(10)

    def logs(self, tail: int = 50) -> str:
        return _tail(self.log, tail)

    def info(self) -> HandleInfo:
        status = "running" if self.is_running() else "exited"
        return HandleInfo(provider="spawn", id=self.id, owner=owner_id(), base_url=self.base_url,
                          status=status, env=self.spec.env)


class SpawnProvider(Provider):
    """Starts ``python -m openenv serve`` children; keeps its handles in memory."""

    name = "spawn"

    def __init__(self) -> None:
        self._handles: dict[str, SpawnHandle] = {}
        self._lock = threading.Lock()
        self._dir = Path(tempfile.mkdtemp(prefix="openenv-spawn-"))

    def start(self, spec: LaunchSpec) -> SpawnHandle:
        server_id = f"spawn-{uuid.uuid4().hex[:12]}"
        ready = self._dir / f"{server_id}.ready.json"
        log = self._dir / f"{server_id}.log"
        argv = [sys.executable, "-m", "openenv", "serve", spec.env, "--host", "127.0.0.1", "--port", "0",
                *spec.max_sessions_args(), "--ready-file", str(ready), "--log-level", "warning"]
        env = {**os.environ, **spec.env_vars, "OPENENV_MODE": spec.mode}
        env.pop("OPENENV_TOKEN", None)
        if spec.token:
            env["OPENENV_TOKEN"] = spec.token  # a secret: through the environment, never argv
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

        def address() -> str | None:  # None until the server wrote its ready file
            try:
                return f"http://127.0.0.1:{int(json.loads(ready.read_text())['port'])}"
            except (OSError, ValueError, KeyError):
                return None

        def exited() -> str | None:
            code = proc.poll()
            return None if code is None else f"exited with code {code}"

        try:
            # Readiness is the provider's job: the handle it returns is already usable.
            wait_until_ready(address, timeout_s=spec.startup_timeout_s, token=spec.token, exited=exited,
                             log_tail=lambda: _tail(log), log_source=str(log), what=f"spawn server {server_id}")
            handle = SpawnHandle(proc, server_id, str(address()), log, spec)
        except BaseException:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
            raise
        with self._lock:
            self._handles[server_id] = handle
        return handle

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        # Only this process's servers exist for this provider, whoever asks.
        with self._lock:
            handles = list(self._handles.values())
        return [h.info() for h in handles if h.is_running()]

    def gc(self) -> list[HandleInfo]:
        with self._lock:
            dead = [h for h in self._handles.values() if not h.is_running()]
            for h in dead:
                del self._handles[h.id]
        for h in dead:
            h.stop()  # reaps the process; a no-op if stop() already ran
        return [h.info() for h in dead]


def _tail(log: Path, lines: int = 50) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
