"""The ``aca`` provider: one Azure Container Apps sandbox per env server (``azure-containerapps-sandbox``).

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``):

* Where: ``AZURE_SUBSCRIPTION_ID``, ``AZURE_RESOURCE_GROUP`` and ``ACA_SANDBOX_GROUP`` (an existing
  sandbox group), at ``ACA_ENDPOINT`` or the regional endpoint of ``ACA_REGION``. A missing one
  fails with one line naming it. Credentials: ``AcaProvider(credential=...)``, else azure-identity's
  ``DefaultAzureCredential``; a credential that cannot get a token, or a token the service refuses,
  fails with one line saying what to set.
* ``start`` creates the sandbox (``begin_create_sandbox``, its long-running operation polled until
  *Running*) from ``options["disk"]`` (a disk image name, default ``LaunchSpec.image``) or
  ``options["disk_id"]``, labelled ``openenv.managed/owner/id/env``, with ``LaunchSpec.env_vars``
  and the token in its environment; starts ``openenv serve`` in the background through ``exec``;
  adds the port (anonymous at the ingress: the env's own token guards it, so ``check`` refuses a
  launch without ``LaunchSpec.token`` unless the server binds loopback or ``options["command"]``
  is given) and waits for the kernel's readiness probe at the port's URL (its error shows the tail
  of the server's output). Any failure (a sandbox that never becomes ready
  included) deletes the sandbox before the error propagates.
* Quota/rate refusals (HTTP 429, 503) are retried with back-off by the SDK's pipeline
  (``RetryPolicy``, honouring ``Retry-After``), then reported in one line.
* ``stop`` deletes the sandbox and polls until it is gone; idempotent. ``ps``/``gc`` list the
  group's sandboxes by label; ``gc`` deletes those whose owner process is gone.
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

__all__ = ["AcaHandle", "AcaProvider"]

LABEL_MANAGED = "openenv.managed"
LABEL_OWNER = "openenv.owner"
LABEL_ID = "openenv.id"
LABEL_ENV = "openenv.env"
OPTIONS = frozenset({"disk", "disk_id", "cpu", "memory", "port", "host", "command", "probe",
                     "poll_interval_s"})
_REQUIRED = ("AZURE_SUBSCRIPTION_ID", "AZURE_RESOURCE_GROUP", "ACA_SANDBOX_GROUP")
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
T = TypeVar("T")


def _call(what: str, fn: Callable[[], T]) -> T:
    """One SDK call, its refusals turned into one line that says what to do."""
    from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

    try:
        return fn()
    except ClientAuthenticationError as exc:
        raise ConfigError(
            f"Azure refused the credentials while trying to {what} ({first_line(exc)}): sign in with "
            "`az login`, or set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET for a "
            "service principal that may use the sandbox group.") from None
    except HttpResponseError as exc:
        if exc.status_code in (429, 503):
            raise RuntimeError(f"Azure kept refusing to {what} for rate or quota limits (HTTP "
                               f"{exc.status_code}) after the SDK's retries: {first_line(exc)}. Wait, "
                               "or raise the sandbox group's quota.") from None
        raise


class AcaHandle(RemoteHandle):
    """An env server in an Azure Container Apps sandbox."""

    def __init__(self, *, provider: str, id: str, base_url: str, group: Any, sandbox_id: str, env: str,
                 token: str | None, probe_mode: str, log: str) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url, env=env, token=token,
                         probe_mode=probe_mode)
        self.sandbox_id = sandbox_id
        self._log = log
        self._group = group

    def where(self) -> str:
        return f"ACA sandbox {self.sandbox_id}"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while its sandbox is *Running*)."""
        from azure.core.exceptions import AzureError, ResourceNotFoundError

        try:
            state = self._group.get_sandbox(self.sandbox_id).state
        except ResourceNotFoundError:
            return "is gone (its sandbox was deleted)"
        except AzureError:
            return None  # cannot tell right now; the probe decides
        return None if state == "Running" else f"stopped (its sandbox is {state})"

    def logs(self, tail: int = 50) -> str:
        """The tail of the server's output in the sandbox (``""`` once stopped)."""
        if self._stopped or tail <= 0:
            return ""
        try:
            ran = self._group.get_sandbox_client(self.sandbox_id).exec(f"tail -n {int(tail)} {shlex.quote(self._log)}")
        except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
            return f"(logs unavailable: {first_line(exc)})"
        return str(ran.stdout or "").rstrip("\n")

    def release(self, timeout_s: float) -> None:
        _delete(self._group, self.sandbox_id, timeout_s)

def _delete(group: Any, sandbox_id: str, timeout_s: float) -> None:
    from azure.core.exceptions import ResourceNotFoundError

    with contextlib.suppress(ResourceNotFoundError):
        poller = _call("delete a sandbox", lambda: group.begin_delete_sandbox(
            sandbox_id, polling_timeout=max(5, int(timeout_s) * 3), polling_interval=1))
        poller.result()


class AcaProvider(Provider):
    """Env servers in Azure Container Apps sandboxes (see the module docstring)."""

    name: ClassVar[str] = "aca"
    requires: ClassVar[str] = ("Azure credentials and a sandbox disk image: its own tests run the contract "
                               "against a local HTTPS fake (plugins/provider-aca/tests)")

    def __init__(self, credential: Any = None, **client_kwargs: Any) -> None:
        self._credential = credential
        self._client_kwargs = client_kwargs

    def _group(self) -> Any:
        missing = [name for name in _REQUIRED if not os.environ.get(name)]
        if missing:  # before the SDK import: an unconfigured provider costs nothing to skip
            raise ConfigError(f"The aca provider needs {missing[0]} set (all of: {', '.join(_REQUIRED)}; "
                              "and ACA_ENDPOINT or ACA_REGION).")
        from azure.containerapps.sandbox import SandboxGroupClient, endpoint_for_region

        endpoint = os.environ.get("ACA_ENDPOINT") or (
            endpoint_for_region(os.environ["ACA_REGION"]) if os.environ.get("ACA_REGION") else None)
        if not endpoint:
            raise ConfigError("The aca provider needs ACA_REGION (e.g. westus2) or ACA_ENDPOINT set.")
        credential = self._credential
        if credential is None:
            from azure.identity import DefaultAzureCredential

            credential = DefaultAzureCredential()
        return SandboxGroupClient(endpoint, credential, subscription_id=os.environ["AZURE_SUBSCRIPTION_ID"],
                                  resource_group=os.environ["AZURE_RESOURCE_GROUP"],
                                  sandbox_group=os.environ["ACA_SANDBOX_GROUP"], **self._client_kwargs)

    def check(self, spec: LaunchSpec) -> None:
        check_options("aca", spec.options, OPTIONS)
        if not (spec.options.get("disk") or spec.options.get("disk_id") or spec.image):
            raise ConfigError("The aca provider needs a disk image with openenv and the env installed: "
                              "options['disk'] (a name), options['disk_id'], or LaunchSpec.image.")
        host = str(spec.options.get("host", "0.0.0.0"))
        if not (spec.token or spec.options.get("command") or host in _LOOPBACK):
            # The port is added with anonymous ingress, so `openenv serve` refuses a wide bind
            # without a token: say so now, not at startup_timeout_s.
            raise ConfigError(f"The aca provider needs LaunchSpec.token: the port is public (anonymous "
                              f"ingress), and `openenv serve --host {host}` refuses to start without a "
                              "token. Set a token (the server then refuses every request without it), "
                              "or give options['command'] to run a server of your own.")

    def command(self, spec: LaunchSpec, log: str = "/tmp/openenv-server.log") -> str:
        """The shell command that starts the server in the background, its output to ``log`` (never
        carries a secret)."""
        opts = spec.options
        serve = str(opts["command"]) if opts.get("command") else " ".join(shlex.quote(a) for a in [
            "openenv", "serve", spec.env, "--host", str(opts.get("host", "0.0.0.0")),
            "--port", str(int(opts.get("port", 8000))), *spec.max_sessions_args(),
            "--mode", spec.mode])
        # `sh -c`: all of a compound options['command'] goes to the log and the background.
        return f"nohup sh -c {shlex.quote(serve)} > {shlex.quote(log)} 2>&1 &"

    def start(self, spec: LaunchSpec) -> AcaHandle:
        self.check(spec)
        group = self._group()
        opts = spec.options
        server_id = f"aca-{uuid.uuid4().hex[:12]}"
        labels = {LABEL_MANAGED: "true", LABEL_OWNER: owner_id().replace(":", "_"), LABEL_ID: server_id,
                  LABEL_ENV: spec.env}
        environment = {str(k): str(v) for k, v in spec.env_vars.items()}
        if spec.token:
            environment["OPENENV_TOKEN"] = spec.token
        source: dict[str, Any] = ({"disk_id": opts["disk_id"], "disk": None} if opts.get("disk_id")
                                  else {"disk": str(opts.get("disk") or spec.image)})
        started = time.monotonic()
        poller = _call("create a sandbox", lambda: group.begin_create_sandbox(
            **source, cpu=str(opts.get("cpu", "1000m")), memory=str(opts.get("memory", "2048Mi")),
            labels=labels, environment=environment, polling_timeout=int(spec.startup_timeout_s),
            polling_interval=int(opts.get("poll_interval_s", 3))))
        sandbox_id: str | None = None
        try:
            sandbox = _call("wait for the sandbox", poller.result)
            sandbox_id = sandbox.sandbox_id
            port = int(opts.get("port", 8000))
            log = f"/tmp/openenv-server-{server_id}.log"  # the readiness error shows its tail
            ran = _call("start the server", lambda: sandbox.exec(self.command(spec, log)))
            if ran.exit_code != 0:
                raise RuntimeError(f"starting the env server in ACA sandbox {sandbox_id} failed with "
                                   f"exit code {ran.exit_code}: {(ran.stderr or ran.stdout).strip()[:500]}")
            added = _call("add the port", lambda: sandbox.add_port(port, anonymous=True))
            if not added.url:
                raise RuntimeError(f"ACA returned no URL for port {port} of sandbox {sandbox_id}.")
            handle = AcaHandle(provider=self.name, id=server_id, base_url=str(added.url).rstrip("/"),
                               group=group, sandbox_id=sandbox_id, env=spec.env, token=spec.token,
                               probe_mode=str(opts.get("probe", "auto")), log=log)
            handle.wait_ready(max(1.0, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException:
            # The poller does not say which sandbox it waited for: find it by its unique label.
            ids = [sandbox_id] if sandbox_id else [
                s.id for s in _call("list sandboxes", lambda: builtins.list(
                    group.list_sandboxes(labels={LABEL_ID: server_id})))]
            for found in ids:
                _delete(group, found, 30.0)
            raise
        return handle

    def _labelled(self, group: Any) -> builtins.list[Any]:
        return builtins.list(_call("list sandboxes", lambda: builtins.list(
            group.list_sandboxes(labels={LABEL_MANAGED: "true"}))))

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Sandboxes of the group this provider labelled (this owner's, or every owner's)."""
        group = self._group()
        me = owner_id()
        infos = []
        for sbx in self._labelled(group):
            owner = _owner(sbx.labels)
            if not owner or (not all_owners and owner != me):
                continue
            status = sbx.state if sbx.state != "Running" else ("running" if owner_alive(owner) else "orphaned")
            infos.append(HandleInfo(provider=self.name, id=sbx.labels.get(LABEL_ID, sbx.id), owner=owner,
                                    status=str(status), env=sbx.labels.get(LABEL_ENV)))
        return infos

    def gc(self) -> builtins.list[HandleInfo]:
        """Delete the labelled sandboxes whose owner process is gone."""
        group = self._group()
        removed = []
        for sbx in self._labelled(group):
            owner = _owner(sbx.labels)
            if not owner or owner_alive(owner):
                continue
            _delete(group, sbx.id, 30.0)
            removed.append(HandleInfo(provider=self.name, id=sbx.labels.get(LABEL_ID, sbx.id), owner=owner,
                                      status="orphaned", env=sbx.labels.get(LABEL_ENV)))
        return removed


def _owner(labels: dict[str, str]) -> str | None:
    """The owner id from its label (``:`` is stored as ``_``: label values are restricted)."""
    value = labels.get(LABEL_OWNER)
    if not value:
        return None
    host, _, rest = value.rpartition("_")
    host, _, pid = host.rpartition("_")
    return f"{host}:{pid}:{rest}"
