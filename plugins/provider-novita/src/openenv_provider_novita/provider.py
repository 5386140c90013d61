"""The ``novita`` provider: one Novita Agent Sandbox per env server, reached through its port host.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), on the official ``novita-sandbox``
SDK (an E2B-protocol SDK: the same sandbox API shape and envd process service):

* Credentials come from ``NOVITA_API_KEY`` (the domain from ``NOVITA_DOMAIN``, default Novita's
  cloud). Without a key, or with one the API refuses, ``start`` fails with one line naming
  ``NOVITA_API_KEY``; without the SDK, with one line naming the package to install.
* The sandbox comes from a template (``options["template"]``, else ``LaunchSpec.image``) that has
  ``openenv`` and the env installed; its metadata carries ``openenv.owner`` / ``openenv.id`` /
  ``openenv.env``. ``LaunchSpec.env_vars`` and the token go into the sandbox's environment, never
  its command.
* The server is started as a background command (``openenv serve <env> --host <host> --port
  <port>``, or ``options["command"]``) whose output goes to a log file in the sandbox, and is
  reached at ``options["url"]`` (default ``https://{host}``, ``{host}`` being the SDK's
  ``get_host(port)``). ``start`` returns once the kernel's readiness probe passes there; a sandbox
  whose server never becomes ready, or exits, is killed before the error propagates (so is one
  whose create failed after Novita made it: found by its ``openenv.id`` metadata).
* Rate limits (HTTP 429) on create are retried with exponential back-off (``create_retries``,
  default 4: this SDK does not retry them itself), then reported; a create the API refuses is
  one line naming the template.
* ``stop`` kills the sandbox (idempotent). ``ps`` lists sandboxes by metadata; ``gc`` kills those
  whose owner process is gone.
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

__all__ = ["NovitaHandle", "NovitaProvider", "LABEL_ENV", "LABEL_ID", "LABEL_OWNER"]

LABEL_OWNER = "openenv.owner"
LABEL_ID = "openenv.id"
LABEL_ENV = "openenv.env"
LABEL_MANAGED = "openenv.managed"
OPTIONS = frozenset({"template", "port", "host", "command", "url", "lifetime_s", "probe",
                     "create_retries"})
#: Where the server's output and exit code go inside the sandbox (read back for errors).
LOG_PATH = "/tmp/openenv-server.log"
EXIT_PATH = "/tmp/openenv-server.exit"
T = TypeVar("T")


def _sdk() -> Any:
    """The ``novita_sandbox`` module; one line naming what to install when it is missing."""
    try:
        import novita_sandbox
    except ImportError:
        raise ConfigError("The novita provider needs the novita-sandbox SDK, which is not installed: "
                          "`pip install openenvkit-provider-novita` (or the SDK alone: "
                          "`pip install 'novita-sandbox>=2.1,<3'`).") from None
    return novita_sandbox


def _api_key() -> str:
    key = os.environ.get("NOVITA_API_KEY")
    if not key:
        raise ConfigError("The novita provider needs an API key: set NOVITA_API_KEY (and "
                          "NOVITA_DOMAIN for another Novita region).")
    return key


def _call(what: str, fn: Callable[[], T], *, retries: int = 0, base_delay_s: float = 0.5) -> T:
    """Run one SDK call: rate limits retried with back-off, refused credentials reported in one line."""
    sdk = _sdk()
    attempt = 0
    while True:
        try:
            return fn()
        except sdk.AuthenticationException as exc:
            raise ConfigError(f"Novita refused the credentials while trying to {what} "
                              f"({first_line(exc)}): set NOVITA_API_KEY to a valid API key.") from None
        except sdk.RateLimitException as exc:
            if attempt >= retries:
                raise RuntimeError(f"Novita kept refusing to {what} for rate or quota limits after "
                                   f"{attempt + 1} attempts: {first_line(exc)}. Wait, or raise your "
                                   "Novita quota.") from None
            time.sleep(base_delay_s * 2**attempt)
            attempt += 1


class NovitaHandle(RemoteHandle):
    """An env server in a Novita sandbox."""

    def __init__(self, *, provider: str, id: str, base_url: str, sandbox: Any, env: str,
                 token: str | None, probe_mode: str, pid: int) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url, env=env, token=token,
                         probe_mode=probe_mode)
        self.sandbox = sandbox
        self.pid = pid

    def where(self) -> str:
        return f"Novita sandbox {self.sandbox.sandbox_id}"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while it runs): the sandbox is gone or paused, or the
        server command exited (its exit code from the sandbox when the shell could write it)."""
        sdk = _sdk()
        try:
            info = self.sandbox.get_info()
        except sdk.NotFoundException:
            return "is gone (its sandbox was killed)"
        except Exception:
            return None  # cannot tell right now; the probe decides
        state = str(getattr(info.state, "value", info.state))
        if state != "running":
            return f"stopped (its sandbox is {state})"
        try:
            if any(p.pid == self.pid for p in self.sandbox.commands.list()):
                return None
            code = self.sandbox.files.read(EXIT_PATH).strip()
        except sdk.NotFoundException:
            return "exited (killed before it could report an exit code)"
        except Exception:
            return None
        return f"exited with code {code}"

    def logs(self, tail: int = 50) -> str:
        if self._stopped:
            return ""
        try:
            text = str(self.sandbox.files.read(LOG_PATH))
        except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
            return f"(logs unavailable: {first_line(exc)})"
        return "\n".join(text.splitlines()[-tail:]) if tail > 0 else ""

    def release(self, timeout_s: float) -> None:
        _kill(self.sandbox.sandbox_id)


def _kill(sandbox_id: str) -> None:
    """Kill a sandbox by id; one that is already gone is fine (the SDK returns ``False`` then)."""
    sdk = _sdk()
    _call("kill a sandbox", lambda: sdk.Sandbox.kill(sandbox_id, api_key=_api_key()), retries=3)


def _listed(metadata: dict[str, str]) -> builtins.list[Any]:
    """Every sandbox whose metadata has these entries (all pages)."""
    sdk = _sdk()
    paginator = sdk.Sandbox.list(query=sdk.SandboxQuery(metadata=metadata), api_key=_api_key())
    found: builtins.list[Any] = []
    # Bounded: a paginator that never ends is a vendor bug, not a reason to hang.
    for _ in range(1000):
        if not paginator.has_next:
            break
        found.extend(_call("list sandboxes", paginator.next_items, retries=3))
    return found


def _kill_labelled(server_id: str) -> None:
    """Kill every sandbox carrying this server id, never raising (the caller has the real error)."""
    with contextlib.suppress(Exception):
        for info in _listed({LABEL_ID: server_id}):
            with contextlib.suppress(Exception):
                _kill(info.sandbox_id)


class NovitaProvider(Provider):
    """Env servers in Novita sandboxes (see the module docstring)."""

    name: ClassVar[str] = "novita"
    requires: ClassVar[str] = ("NOVITA_API_KEY and a sandbox template: its own tests run the contract against "
                               "a local Novita API and envd (plugins/provider-novita/tests)")

    def check(self, spec: LaunchSpec) -> None:
        check_options("novita", spec.options, OPTIONS)
        if not (spec.options.get("template") or spec.image):
            raise ConfigError("The novita provider needs a sandbox template: options['template'] (or "
                              "LaunchSpec.image), a Novita template that has openenv and the env installed.")
        url = str(spec.options.get("url", "{host}"))
        if "{host}" not in url and "{port}" not in url:
            raise ConfigError(f"options['url'] of the novita provider ({url!r}) must contain '{{host}}' (the "
                              "SDK's host for the port) or '{port}', e.g. 'https://{host}'.")

    def command(self, spec: LaunchSpec) -> str:
        """The server command run in the sandbox (never carries a secret)."""
        opts = spec.options
        if opts.get("command"):
            return str(opts["command"])
        return " ".join(shlex.quote(a) for a in [
            "openenv", "serve", spec.env, "--host", str(opts.get("host", "0.0.0.0")),
            "--port", str(int(opts.get("port", 8000))), *spec.max_sessions_args(),
            "--mode", spec.mode,
            # The sandbox is reached only through Novita's per-sandbox host, not an open port.
            "--allow-open"])

    def start(self, spec: LaunchSpec) -> NovitaHandle:
        self.check(spec)
        sdk = _sdk()
        key = _api_key()
        opts = spec.options
        template = str(opts.get("template") or spec.image)
        server_id = f"novita-{uuid.uuid4().hex[:12]}"
        metadata = {LABEL_MANAGED: "true", LABEL_OWNER: owner_id(), LABEL_ID: server_id, LABEL_ENV: spec.env}
        envs = {str(k): str(v) for k, v in spec.env_vars.items()}
        if spec.token:
            envs["OPENENV_TOKEN"] = spec.token
        retries = int(opts.get("create_retries", 4))
        started = time.monotonic()
        try:
            sandbox = _call("create a sandbox", lambda: sdk.Sandbox.create(
                template=template, timeout=int(opts.get("lifetime_s", 3600)), metadata=metadata,
                envs=envs, api_key=key), retries=retries)
        except ConfigError:
            raise
        except BaseException as exc:
            # Novita may have made the sandbox before the call failed (a dropped reply): find it by
            # its id and kill it, so nothing is left behind.
            _kill_labelled(server_id)
            if isinstance(exc, sdk.SandboxException) and not isinstance(exc, sdk.RateLimitException):
                raise RuntimeError(f"Novita could not create a sandbox from template '{template}' for "
                                   f"'{spec.env}': {first_line(exc)}. Check the template name "
                                   "(options['template']) and your Novita quota.") from None
            raise
        try:
            port = int(opts.get("port", 8000))
            # The shell records the exit code, so a server that dies is reported with it; the
            # subshell keeps a command's own `;` or `exit` from skipping the redirect and the record.
            line = f"({self.command(spec)}\n) > {LOG_PATH} 2>&1; echo $? > {EXIT_PATH}"
            run = _call("start the server", lambda: sandbox.commands.run(line, background=True, timeout=0),
                        retries=0)
            url = str(opts.get("url", "https://{host}")).format(host=sandbox.get_host(port), port=port)
            handle = NovitaHandle(provider=self.name, id=server_id, base_url=url.rstrip("/"), sandbox=sandbox,
                               env=spec.env, token=spec.token, probe_mode=str(opts.get("probe", "auto")),
                               pid=int(run.pid))
            handle.wait_ready(max(1.0, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException:
            with contextlib.suppress(Exception):
                _kill(sandbox.sandbox_id)
            raise
        return handle

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Sandboxes this provider started, of this owner (every owner with ``all_owners``)."""
        me = owner_id()
        infos = []
        for sandbox in _listed({LABEL_MANAGED: "true"}):
            labels = sandbox.metadata or {}
            owner = labels.get(LABEL_OWNER)
            if not owner or (not all_owners and owner != me):
                continue
            state = str(getattr(sandbox.state, "value", sandbox.state))
            status = state if state != "running" else ("running" if owner_alive(owner) else "orphaned")
            infos.append(HandleInfo(provider=self.name, id=labels.get(LABEL_ID, sandbox.sandbox_id),
                                    owner=owner, status=status, env=labels.get(LABEL_ENV)))
        return infos

    def gc(self) -> builtins.list[HandleInfo]:
        """Kill the sandboxes this provider started whose owner process is gone."""
        removed = []
        for sandbox in _listed({LABEL_MANAGED: "true"}):
            labels = sandbox.metadata or {}
            owner = labels.get(LABEL_OWNER)
            if not owner or owner_alive(owner):
                continue
            _kill(sandbox.sandbox_id)
            removed.append(HandleInfo(provider=self.name, id=labels.get(LABEL_ID, sandbox.sandbox_id),
                                      owner=owner, status="orphaned", env=labels.get(LABEL_ENV)))
        return removed
