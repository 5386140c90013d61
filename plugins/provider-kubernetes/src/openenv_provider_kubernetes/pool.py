"""A warm pool: N ready env servers kept for one ``LaunchSpec``, so that ``start`` is fast.

Promises:

* ``WarmPool(provider, spec, size)`` starts filling at once, in one background thread, until
  ``size`` ready handles wait idle; every ``acquire`` triggers a refill.
* ``acquire(timeout_s)`` returns an idle ready handle at once when there is one (after checking it
  still runs; a dead one is stopped and skipped); otherwise it starts a server itself (the caller
  never waits behind the filler's queue). The handle then belongs to the caller: ``stop`` it as
  usual (servers are not reused after a user had them: an env keeps state).
* A start that fails in the filler is logged and retried after a back-off (bounded at 30 s), so a
  broken spec does not spin; ``last_error`` keeps the message. ``close()`` stops the filler and
  every idle handle, and waits for a refill in flight to finish and stop its server (bounded by
  the spec's startup timeout); it is idempotent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import deque
from dataclasses import asdict
from typing import TYPE_CHECKING

from openenv.interfaces import LaunchSpec

if TYPE_CHECKING:
    from openenv_provider_kubernetes.provider import KubernetesHandle, KubernetesProvider

__all__ = ["WarmPool", "pool_key"]

log = logging.getLogger("openenv.provider.kubernetes")


def pool_key(spec: LaunchSpec) -> str:
    """Specs with the same key get interchangeable servers (the token is part of it)."""
    return hashlib.sha256(json.dumps(asdict(spec), sort_keys=True, default=str).encode()).hexdigest()


class WarmPool:
    """Ready servers for one spec (see the module docstring)."""

    def __init__(self, provider: KubernetesProvider, spec: LaunchSpec, *, size: int) -> None:
        if size < 1:
            raise ValueError(f"a warm pool needs size >= 1, got {size}")
        self.provider = provider
        self.spec = spec
        self.size = size
        self.last_error: str | None = None
        self._idle: deque[KubernetesHandle] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._wanted = threading.Event()
        self._wanted.set()
        self._thread = threading.Thread(target=self._fill, name="k8s-warm-pool", daemon=True)
        self._thread.start()

    @property
    def idle(self) -> int:
        with self._cond:
            return len(self._idle)

    def wait_full(self, timeout_s: float) -> bool:
        """Block until ``size`` servers are idle (``False`` at the timeout)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._idle) >= self.size or self._closed, timeout=timeout_s)

    def _fill(self) -> None:
        from openenv_provider_kubernetes.options import parse_options

        backoff = 1.0
        while True:
            self._wanted.wait()
            with self._cond:
                if self._closed:
                    return
                if len(self._idle) >= self.size:
                    self._wanted.clear()
                    continue
            try:
                handle = self.provider.launch(self.spec, parse_options({**self.provider._defaults,
                                                                       **self.spec.options}))
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("warm pool: starting a server failed (retrying in %.0fs): %s", backoff, exc)
                with self._cond:
                    if self._cond.wait_for(lambda: self._closed, timeout=backoff):
                        return
                backoff = min(30.0, backoff * 2)
                continue
            backoff = 1.0
            with self._cond:
                if self._closed:
                    handle.discard()
                    return
                self._idle.append(handle)
                self._cond.notify_all()

    def acquire(self, timeout_s: float) -> KubernetesHandle:
        while True:
            with self._cond:
                if self._closed:
                    raise RuntimeError("this warm pool is closed")
                handle = self._idle.popleft() if self._idle else None
            self._wanted.set()
            if handle is None:
                from dataclasses import replace

                return self.provider.launch(replace(self.spec, startup_timeout_s=timeout_s),
                                            self.provider.options(self.spec))
            try:
                if handle.is_running():
                    return handle
            except Exception as exc:
                log.warning("warm pool: dropping %r: %s", handle, exc)
            handle.discard()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            self._cond.notify_all()
        self._wanted.set()
        for handle in idle:
            try:
                handle.stop(timeout_s=2)
            except Exception as exc:
                log.warning("warm pool: could not stop %r: %s", handle, exc)
        # A refill in flight (an acquire triggers one) finishes its launch and then stops what it
        # started: wait for that, so that nothing of the pool outlives close() (a launch left running
        # could leave its Pod behind if the cluster went away meanwhile). Bounded by the launch's own
        # startup timeout.
        self._thread.join(timeout=(self.spec.startup_timeout_s or 120.0) + 30.0)
        if self._thread.is_alive():
            log.warning("warm pool: a refill was still starting a server after close(); `gc` removes it if it "
                        "stays behind")
