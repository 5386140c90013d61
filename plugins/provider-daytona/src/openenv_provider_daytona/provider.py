"""The ``daytona`` provider: one Daytona sandbox per env server, reached through a signed preview URL.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), on the official ``daytona`` SDK:

* Credentials come from ``DAYTONA_API_KEY`` (the API from ``DAYTONA_API_URL``, default Daytona's
  cloud; the region from ``DAYTONA_TARGET``). Without a key, or with one the API refuses, ``start``
  fails with one line naming ``DAYTONA_API_KEY``.
* The sandbox comes from ``options["snapshot"]`` or an image (``options["image"]``, else
  ``LaunchSpec.image``); it is labelled ``openenv.owner`` / ``openenv.id`` / ``openenv.env``.
  ``LaunchSpec.env_vars`` and the token go into the sandbox's environment, never its command.
* The server is started in a background session command (``openenv serve <env> --host <host>
  --port <port>``, or ``options["command"]``), and reached at the sandbox's signed preview URL for
  ``port``. ``start`` returns once the kernel's readiness probe passes there; a sandbox that never
  becomes ready is deleted before the ``TimeoutError`` propagates (so is one whose start failed,
  and one that never reached ``started``: found by its ``openenv.id`` label, since the SDK's
  timeout or failed start returns no sandbox).
* Rate limits (HTTP 429) on create are retried with exponential back-off (``create_retries``,
  default 4), then reported.
* ``stop`` deletes the sandbox (idempotent: a sandbox that is already gone is fine). ``ps`` lists
  sandboxes by label; ``gc`` deletes those whose owner process is gone.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shlex
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, owner_alive, owner_id
from openenv.remote import RemoteHandle, check_options, first_line

__all__ = ["DaytonaHandle", "DaytonaProvider", "LABEL_ENV", "LABEL_ID", "LABEL_OWNER"]

LABEL_OWNER = "openenv.owner"
LABEL_ID = "openenv.id"
LABEL_ENV = "openenv.env"
LABEL_MANAGED = "openenv.managed"
OPTIONS = frozenset({"image", "snapshot", "port", "host", "command", "cpus", "memory_gib", "probe",
                     "create_retries", "url_ttl_s"})
_SESSION = "openenv"
T = TypeVar("T")


def _daytona() -> Any:
    """The SDK client, configured from the environment; one line naming the variable if it cannot be."""
    key = os.environ.get("DAYTONA_API_KEY")
    if not key:  # checked before the SDK is imported (a second and a half): `providers ps` stays fast
        raise ConfigError("The daytona provider needs an API key: set DAYTONA_API_KEY (and "
                          "DAYTONA_API_URL for a self-hosted Daytona).")
    from daytona import Daytona, DaytonaConfig
    return Daytona(DaytonaConfig(api_key=key, api_url=os.environ.get("DAYTONA_API_URL") or None,
                                 target=os.environ.get("DAYTONA_TARGET") or None))


def _call(what: str, fn: Callable[[], T], *, retries: int = 0, base_delay_s: float = 0.5) -> T:
    """Run one SDK call: rate limits retried with back-off, refused credentials reported in one line."""
    from daytona.common.errors import DaytonaAuthenticationError, DaytonaRateLimitError

    attempt = 0
    while True:
        try:
            return fn()
        except DaytonaAuthenticationError as exc:
            raise ConfigError(f"Daytona refused the credentials while trying to {what} "
                              f"({first_line(exc)}): set DAYTONA_API_KEY to a valid API key.") from None
        except DaytonaRateLimitError as exc:
            if attempt >= retries:
                raise RuntimeError(f"Daytona kept refusing to {what} for rate or quota limits after "
                                   f"{attempt + 1} attempts: {first_line(exc)}. Wait, or raise your "
                                   "Daytona quota.") from None
            time.sleep(base_delay_s * 2**attempt)
            attempt += 1


class DaytonaHandle(RemoteHandle):
    """An env server in a Daytona sandbox."""

    def __init__(self, *, provider: str, id: str, base_url: str, client: Any, sandbox: Any, env: str,
                 token: str | None, probe_mode: str, command_id: str | None) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url, env=env, token=token,
                         probe_mode=probe_mode)
        self.sandbox = sandbox
        self._client = client
        self._command_id = command_id

    def where(self) -> str:
        return f"Daytona sandbox {self.sandbox.id}"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while it runs): the sandbox left ``started``, or the
        server command exited."""
        from daytona.common.errors import DaytonaError, DaytonaNotFoundError

        try:
            self.sandbox.refresh_data()
        except DaytonaNotFoundError:
            return "is gone (its sandbox was deleted)"
        except DaytonaError:
            return None  # cannot tell right now; the probe decides
        state = str(getattr(self.sandbox.state, "value", self.sandbox.state))
        if state != "started":
            return f"stopped (its sandbox is {state})"
        if self._command_id:
            with contextlib.suppress(DaytonaError):
                cmd = self.sandbox.process.get_session_command(_SESSION, self._command_id)
                if cmd.exit_code is not None:
                    return f"exited with code {cmd.exit_code}"
        return None

    def logs(self, tail: int = 50) -> str:
        if self._stopped or not self._command_id:
            return ""
        try:
            out = self.sandbox.process.get_session_command_logs(_SESSION, self._command_id)
        except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
            return f"(logs unavailable: {first_line(exc)})"
        text = "\n".join(part for part in (out.stdout, out.stderr) if part)
        return "\n".join(text.splitlines()[-tail:]) if tail > 0 else ""

    def release(self, timeout_s: float) -> None:
        _delete(self._client, self.sandbox, timeout_s)

def _delete(client: Any, sandbox: Any, timeout_s: float) -> None:
    from daytona.common.errors import DaytonaNotFoundError

    with contextlib.suppress(DaytonaNotFoundError):
        _call("delete a sandbox", lambda: client.delete(sandbox, timeout=max(1.0, timeout_s)), retries=3)


def _delete_labelled(client: Any, server_id: str) -> None:
    """Delete every sandbox labelled with this server id, never raising (the caller has the real error)."""
    from daytona import ListSandboxesQuery

    with contextlib.suppress(Exception):
        for sandbox in client.list(ListSandboxesQuery(labels={LABEL_ID: server_id})):
            with contextlib.suppress(Exception):
                _delete(client, sandbox, 30.0)


class DaytonaProvider(Provider):
    """Env servers in Daytona sandboxes (see the module docstring)."""

    name: ClassVar[str] = "daytona"
    requires: ClassVar[str] = ("DAYTONA_API_KEY and a sandbox image or snapshot: its own tests run the contract "
                               "against a local Daytona API (plugins/provider-daytona/tests)")

    def check(self, spec: LaunchSpec) -> None:
        check_options("daytona", spec.options, OPTIONS)
        if not (spec.options.get("snapshot") or spec.options.get("image") or spec.image):
            raise ConfigError("The daytona provider needs a sandbox source: options['snapshot'] (a "
                              "Daytona snapshot) or an image (options['image'] or LaunchSpec.image) "
                              "that has openenv and the env installed.")

    def command(self, spec: LaunchSpec) -> str:
        """The server command run in the sandbox (never carries a secret)."""
        opts = spec.options
        if opts.get("command"):
            return str(opts["command"])
        return " ".join(shlex.quote(a) for a in [
            "openenv", "serve", spec.env, "--host", str(opts.get("host", "0.0.0.0")),
            "--port", str(int(opts.get("port", 8000))), *spec.max_sessions_args(),
            "--mode", spec.mode,
            # The sandbox is reached only through Daytona's signed preview URL, not an open port.
            "--allow-open"])

    def start(self, spec: LaunchSpec) -> DaytonaHandle:
        from daytona import CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams, Resources
        from daytona.common.errors import DaytonaTimeoutError
        from daytona_toolbox_api_client.models import SessionExecuteRequest

        self.check(spec)
        client = _daytona()
        opts = spec.options
        server_id = f"daytona-{uuid.uuid4().hex[:12]}"
        labels = {LABEL_MANAGED: "true", LABEL_OWNER: owner_id(), LABEL_ID: server_id, LABEL_ENV: spec.env}
        env_vars = {str(k): str(v) for k, v in spec.env_vars.items()}
        if spec.token:
            env_vars["OPENENV_TOKEN"] = spec.token
        params: Any
        if opts.get("snapshot"):
            params = CreateSandboxFromSnapshotParams(snapshot=str(opts["snapshot"]), labels=labels,
                                                     env_vars=env_vars)
        else:
            resources = None
            if opts.get("cpus") or opts.get("memory_gib"):
                resources = Resources(cpu=opts.get("cpus"), memory=opts.get("memory_gib"))
            params = CreateSandboxFromImageParams(image=str(opts.get("image") or spec.image),
                                                  labels=labels, env_vars=env_vars, resources=resources)
        started = time.monotonic()
        try:
            sandbox = _call("create a sandbox",
                            lambda: client.create(params, timeout=spec.startup_timeout_s),
                            retries=int(opts.get("create_retries", 4)))
        except BaseException as exc:
            # The SDK creates the sandbox, then waits for `started`: a timeout or a failed start
            # raises with no Sandbox returned, so find what was created by its id label and delete it.
            _delete_labelled(client, server_id)
            if isinstance(exc, DaytonaTimeoutError):
                raise TimeoutError(f"The Daytona sandbox for '{spec.env}' did not reach 'started' within "
                                   f"{spec.startup_timeout_s:g} s (raise startup_timeout_s); it was "
                                   "deleted.") from None
            raise
        try:
            port = int(opts.get("port", 8000))
            _call("start the server", lambda: sandbox.process.create_session(_SESSION), retries=3)
            run = _call("start the server", lambda: sandbox.process.execute_session_command(
                _SESSION, SessionExecuteRequest(command=self.command(spec), run_async=True)), retries=3)
            signed = _call("get a preview URL", lambda: sandbox.create_signed_preview_url(
                port, expires_in_seconds=int(opts.get("url_ttl_s", 24 * 3600))), retries=3)
            handle = DaytonaHandle(provider=self.name, id=server_id, base_url=str(signed.url).rstrip("/"),
                                   client=client, sandbox=sandbox, env=spec.env, token=spec.token,
                                   probe_mode=str(opts.get("probe", "auto")), command_id=run.cmd_id)
            handle.wait_ready(max(1.0, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException:
            _delete(client, sandbox, 30.0)
            raise
        return handle

    def _mine(self, client: Any) -> builtins.list[Any]:
        from daytona import ListSandboxesQuery

        return builtins.list(_call("list sandboxes", lambda: builtins.list(
            client.list(ListSandboxesQuery(labels={LABEL_MANAGED: "true"}))), retries=3))

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Sandboxes this provider labelled, of this owner (every owner with ``all_owners``)."""
        client = _daytona()
        me = owner_id()
        infos = []
        for sandbox in self._mine(client):
            labels = sandbox.labels or {}
            owner = labels.get(LABEL_OWNER)
            if not owner or (not all_owners and owner != me):
                continue
            state = str(getattr(sandbox.state, "value", sandbox.state))
            status = state if state != "started" else ("running" if owner_alive(owner) else "orphaned")
            infos.append(HandleInfo(provider=self.name, id=labels.get(LABEL_ID, sandbox.id), owner=owner,
                                    status=status, env=labels.get(LABEL_ENV)))
        return infos

    def gc(self) -> builtins.list[HandleInfo]:
        """Delete the labelled sandboxes whose owner process is gone."""
        client = _daytona()
        removed = []
        for sandbox in self._mine(client):
            labels = sandbox.labels or {}
            owner = labels.get(LABEL_OWNER)
            if not owner or owner_alive(owner):
                continue
            _delete(client, sandbox, 30.0)
            removed.append(HandleInfo(provider=self.name, id=labels.get(LABEL_ID, sandbox.id), owner=owner,
                                      status="orphaned", env=labels.get(LABEL_ENV)))
        return removed
