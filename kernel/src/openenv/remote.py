"""What every provider of remote sandboxes (Daytona, Azure Container Apps, Modal, ...) shares.

An env server in a vendor's sandbox is reached at a URL the vendor hands out and is probed by the
kernel's readiness probe; the vendor's API says whether the sandbox is still up. ``RemoteHandle``
is that handle with the vendor-specific parts left to fill in:

* ``where()`` — the sandbox, for messages (``"Modal sandbox sb-123"``);
* ``exit_description()`` — why the server is gone, or ``None`` while it runs (``None`` too when the
  vendor cannot tell right now: the probe then decides);
* ``release(timeout_s)`` — delete or terminate the sandbox; called once, by ``stop``;
* ``logs(tail)`` — optional, for the readiness error's log tail.

``stop`` is idempotent and thread-safe; ``is_running`` is false once stopped or gone.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Collection, Mapping
from typing import Any

from openenv.errors import ConfigError, did_you_mean
from openenv.interfaces import ProviderHandle
from openenv.readiness import MODES, wait_until_ready

__all__ = ["RemoteHandle", "check_options", "first_line"]


def first_line(exc: BaseException) -> str:
    """The first line of an SDK error's text (its type name when it has none): SDK errors often
    carry whole response bodies, and a one-line message must stay one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_options(provider: str, options: Mapping[str, Any], accepted: Collection[str]) -> None:
    """The checks every remote provider makes of ``LaunchSpec.options`` first: no option it does
    not know (named, with a did-you-mean and the accepted ones), and a readiness ``probe`` mode that
    exists. ``ConfigError`` otherwise."""
    names = sorted(accepted)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"Unknown option '{unknown[0]}' for provider '{provider}'."
                          f"{did_you_mean(unknown[0], names)} Accepted options: {', '.join(names)}.")
    if options.get("probe", "auto") not in MODES:
        raise ConfigError(f"Unknown probe mode {options['probe']!r}: use one of {', '.join(MODES)}.")


class RemoteHandle(ProviderHandle):
    """An env server in a vendor's sandbox (see the module docstring)."""

    def __init__(self, *, provider: str, id: str, base_url: str, env: str, token: str | None,
                 probe_mode: str) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url)  # the base refuses empty fields
        self.env = env
        self._token = token
        self._probe_mode = probe_mode
        self._lock = threading.Lock()
        self._stopped = False

    @abstractmethod
    def where(self) -> str:
        """The sandbox, for messages: ``"<vendor> sandbox <id>"``."""

    @abstractmethod
    def exit_description(self) -> str | None:
        """Why the server is gone, or ``None`` while it runs (or while the vendor cannot tell)."""

    @abstractmethod
    def release(self, timeout_s: float) -> None:
        """Delete or terminate the sandbox (a sandbox that is already gone is fine)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.where()} env={self.env!r}>"

    def is_running(self) -> bool:
        return not self._stopped and self.exit_description() is None

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, mode=self._probe_mode,
                         exited=self.exit_description, log_tail=lambda: self.logs(30),
                         what=f"env server '{self.env}' ({self.where()})", max_interval_s=1.0)

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self.release(timeout_s)
