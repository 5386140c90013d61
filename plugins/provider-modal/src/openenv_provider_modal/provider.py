"""The ``modal`` provider: one Modal sandbox per env server, reached through an encrypted port tunnel.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), on the official ``modal`` SDK:

* Credentials come from ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` (the API from
  ``MODAL_SERVER_URL``, default Modal's). Without them, or with a token Modal refuses, every call
  fails with one line naming both variables. Profiles in ``~/.modal.toml`` are not read: what the
  provider runs as is always what the environment says.
* Sandboxes belong to one Modal app (``OPENENV_MODAL_APP``, default ``openenv``; created if
  missing), so ``ps``/``gc`` list exactly that app. Each sandbox is tagged at creation
  ``openenv.managed`` / ``openenv.owner`` / ``openenv.id`` / ``openenv.env``.
* The sandbox runs a registry image (``options["image"]``, else ``LaunchSpec.image``) that has
  ``openenv`` and the env installed; its entrypoint is ``openenv serve <env> --host <host> --port
  <port>`` (or ``options["command"]``). ``LaunchSpec.env_vars`` and the token go into the sandbox's
  environment (the SDK sends them as an inline secret), never into the command.
* The port is an *encrypted port*: the server is reached at the tunnel's ``https://`` URL.
  Modal's tunnels are public, so a server without ``LaunchSpec.token`` refuses to start unless
  ``options["allow_open"]`` says an open server is intended.
* ``start`` returns once the kernel's readiness probe passes through the tunnel; a sandbox that
  never becomes ready, or whose server exits, is terminated before the error propagates.
* Quota and rate refusals (gRPC ``RESOURCE_EXHAUSTED``) on create are retried with exponential
  back-off (``create_retries``, default 4), then reported.
* ``stop`` terminates the sandbox and waits (bounded) until Modal reports it ended; it is
  idempotent. ``ps`` lists the app's tagged sandboxes; ``gc`` terminates those whose owner is gone.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, owner_alive, owner_id
from openenv.remote import RemoteHandle, check_options, first_line

__all__ = ["DEFAULT_APP", "ModalHandle", "ModalProvider", "TAG_ENV", "TAG_ID", "TAG_MANAGED", "TAG_OWNER"]

TAG_OWNER = "openenv.owner"
TAG_ID = "openenv.id"
TAG_ENV = "openenv.env"
TAG_MANAGED = "openenv.managed"
DEFAULT_APP = "openenv"
OPTIONS = frozenset({"image", "port", "host", "command", "cpu", "memory_mib", "lifetime_s", "idle_timeout_s",
                     "region", "create_retries", "probe", "allow_open"})
#: Modal's longest sandbox lifetime is a day; an hour by default bounds what a forgotten server costs.
DEFAULT_LIFETIME_S = 3600
T = TypeVar("T")


def _credentials() -> tuple[str, str]:
    token_id, token_secret = os.environ.get("MODAL_TOKEN_ID"), os.environ.get("MODAL_TOKEN_SECRET")
    if not (token_id and token_secret):
        raise ConfigError("The modal provider needs a Modal token: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET "
                          "(`modal token new` makes one; MODAL_SERVER_URL for another Modal API).")
    return token_id, token_secret


def _client() -> Any:
    """A Modal client for the token in the environment, checked with one ``ClientHello``."""
    token_id, token_secret = _credentials()  # before the SDK import: unconfigured stays fast
    import modal

    client = _call("connect", lambda: modal.Client.from_credentials(token_id, token_secret))
    try:
        _call("connect", client.hello)
    except BaseException:
        client.close()
        raise
    return client


def _call(what: str, fn: Callable[[], T], *, retries: int = 0, base_delay_s: float = 0.5) -> T:
    """Run one SDK call: quota/rate refusals retried with back-off, refused credentials in one line."""
    from modal.exception import AuthError, PermissionDeniedError, ResourceExhaustedError
    from modal.exception import ConnectionError as ModalConnectionError

    attempt = 0
    while True:
        try:
            return fn()
        except AuthError as exc:
            raise ConfigError(f"Modal refused the credentials while trying to {what} ({first_line(exc)}): "
                              "set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET to a valid token.") from None
        except PermissionDeniedError as exc:
            raise ConfigError(f"Modal does not let this token {what} ({first_line(exc)}): set MODAL_TOKEN_ID "
                              "and MODAL_TOKEN_SECRET to a token of a workspace that may run sandboxes.") from None
        except ModalConnectionError:
            # The SDK has already retried the connection for about a minute.
            from modal.config import config

            raise RuntimeError(f"Could not reach the Modal API at {config.get('server_url')} to {what}: check "
                               "MODAL_SERVER_URL (unset, it is Modal's own API) and the network.") from None
        except ResourceExhaustedError as exc:
            if attempt >= retries:
                raise RuntimeError(f"Modal kept refusing to {what} for quota or rate limits after {attempt + 1} "
                                   f"attempts: {first_line(exc)}. Wait, or raise your Modal limits.") from None
            time.sleep(base_delay_s * 2**attempt)
            attempt += 1


def _ended(code: int) -> str:
    # The SDK reports a sandbox that hit its lifetime as 124 and a terminated one as 137.
    if code == 124:
        return "timed out (the sandbox outlived options['lifetime_s'])"
    return f"exited with code {code}"


class ModalHandle(RemoteHandle):
    """An env server in a Modal sandbox."""

    def __init__(self, *, provider: str, id: str, base_url: str, client: Any, sandbox: Any, env: str,
                 token: str | None, probe_mode: str) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url, env=env, token=token,
                         probe_mode=probe_mode)
        self.sandbox = sandbox
        self._client = client

    def where(self) -> str:
        return f"Modal sandbox {self.sandbox.object_id}"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while it runs): the sandbox's entrypoint ended."""
        from modal.exception import Error, NotFoundError

        try:
            code = self.sandbox.poll()
        except NotFoundError:
            return "is gone (its sandbox no longer exists)"
        except Error:
            return None  # cannot tell right now; the probe decides
        return None if code is None else _ended(int(code))

    def logs(self, tail: int = 50) -> str:
        if self._stopped or tail <= 0:
            return ""
        try:
            text = "".join(entry.message for entry in self.sandbox.logs.tail(tail))
        except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
            return f"(logs unavailable: {first_line(exc)})"
        return "\n".join(text.splitlines()[-tail:])

    def release(self, timeout_s: float) -> None:
        """Terminate the sandbox (Modal has no graceful stop) and wait until it reports its end."""
        try:
            _terminate(self.sandbox, timeout_s)
        finally:
            self._client.close()


def _terminate(sandbox: Any, timeout_s: float) -> None:
    """Terminate ``sandbox`` (gone already is fine) and poll, for at most ``timeout_s``, until it ended:
    termination is asynchronous on Modal's side, and a ``ps`` right after should not list it."""
    from modal.exception import NotFoundError

    with contextlib.suppress(NotFoundError):
        _call("terminate a sandbox", sandbox.terminate, retries=3)
        deadline = time.monotonic() + max(0.0, timeout_s)
        while sandbox.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)


class ModalProvider(Provider):
    """Env servers in Modal sandboxes (see the module docstring)."""

    name: ClassVar[str] = "modal"
    requires: ClassVar[str] = ("MODAL_TOKEN_ID/MODAL_TOKEN_SECRET and a registry image with openenv and the env: its "
                               "own tests run the contract against a local Modal API (plugins/provider-modal/tests)")

    def __init__(self, *, app: str | None = None) -> None:
        self.app_name = app or os.environ.get("OPENENV_MODAL_APP") or DEFAULT_APP

    def check(self, spec: LaunchSpec) -> None:
        check_options("modal", spec.options, OPTIONS)
        if not (spec.options.get("image") or spec.image):
            raise ConfigError("The modal provider needs a registry image that has openenv and the env "
                              "installed: options['image'] or LaunchSpec.image (e.g. 'ghcr.io/me/echo-env:1').")
        lifetime = spec.options.get("lifetime_s", DEFAULT_LIFETIME_S)
        if not isinstance(lifetime, int | float) or not 1 <= lifetime <= 86400:
            raise ConfigError(f"options['lifetime_s'] must be 1 to 86400 seconds (Modal's limit), not {lifetime!r}.")
        command = spec.options.get("command")
        if command is not None and not ((isinstance(command, str) and command.strip())
                                        or (isinstance(command, list | tuple) and command)):
            raise ConfigError("options['command'] must be a shell command (a string) or an argv list, not "
                              f"{command!r}.")

    def command(self, spec: LaunchSpec) -> builtins.list[str]:
        """The sandbox's entrypoint argv (never carries a secret)."""
        opts = spec.options
        command = opts.get("command")
        if isinstance(command, str):
            return ["sh", "-c", command]
        if command:
            return [str(arg) for arg in command]
        return ["openenv", "serve", spec.env, "--host", str(opts.get("host", "0.0.0.0")),
                "--port", str(int(opts.get("port", 8000))), *spec.max_sessions_args(),
                "--mode", spec.mode,
                # The tunnel is public: without a token (OPENENV_TOKEN in the sandbox's environment)
                # the server refuses to start unless the caller opts in.
                *(["--allow-open"] if opts.get("allow_open") else [])]

    def start(self, spec: LaunchSpec) -> ModalHandle:
        import modal

        self.check(spec)
        opts = spec.options
        server_id = f"modal-{uuid.uuid4().hex[:12]}"
        port = int(opts.get("port", 8000))
        env: dict[str, str | None] = {str(k): str(v) for k, v in spec.env_vars.items()}
        if spec.token:
            env["OPENENV_TOKEN"] = spec.token
        extra: dict[str, Any] = {}
        if opts.get("cpu"):
            extra["cpu"] = float(opts["cpu"])
        if opts.get("memory_mib"):
            extra["memory"] = int(opts["memory_mib"])
        if opts.get("idle_timeout_s"):
            extra["idle_timeout"] = int(opts["idle_timeout_s"])
        if opts.get("region"):
            extra["region"] = opts["region"]
        started = time.monotonic()
        client = _client()
        try:
            app = _call("look up the app", lambda: modal.App.lookup(self.app_name, create_if_missing=True,
                                                                    client=client), retries=3)
            sandbox = _call("create a sandbox", lambda: modal.Sandbox.create(
                *self.command(spec), app=app, client=client, image=modal.Image.from_registry(str(opts.get("image")
                                                                                                or spec.image)),
                env=env, encrypted_ports=[port], timeout=int(opts.get("lifetime_s", DEFAULT_LIFETIME_S)),
                tags={TAG_MANAGED: "true", TAG_OWNER: owner_id(), TAG_ID: server_id, TAG_ENV: spec.env}, **extra),
                retries=int(opts.get("create_retries", 4)))
        except BaseException:
            client.close()
            raise
        try:
            remaining = spec.startup_timeout_s - (time.monotonic() - started)
            tunnels = _call("get the port's tunnel", lambda: sandbox.tunnels(timeout=max(1, min(50, int(remaining)))),
                            retries=3)
            if port not in tunnels:
                raise RuntimeError(f"Modal opened no tunnel for port {port} of sandbox {sandbox.object_id} "
                                   f"(tunnels: {sorted(tunnels)}).")
            handle = ModalHandle(provider=self.name, id=server_id, base_url=tunnels[port].url.rstrip("/"),
                                 client=client, sandbox=sandbox, env=spec.env, token=spec.token,
                                 probe_mode=str(opts.get("probe", "auto")))
            handle.wait_ready(max(1.0, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException as exc:
            try:
                _terminate(sandbox, 30.0)
            except Exception as cleanup:  # keep the start-up error; say what was left behind
                exc.add_note(f"Terminating sandbox {sandbox.object_id} failed too ({first_line(cleanup)}); "
                             "`openenv providers gc` terminates it once this process has exited.")
            finally:
                client.close()
            raise
        return handle

    def _mine(self, client: Any) -> builtins.list[tuple[Any, dict[str, str]]]:
        """The app's running sandboxes this provider tagged, with their tags (none if no app yet)."""
        import modal
        from modal.exception import NotFoundError

        try:
            app = _call("look up the app", lambda: modal.App.lookup(self.app_name, client=client), retries=3)
        except NotFoundError:
            return []
        sandboxes = _call("list sandboxes", lambda: builtins.list(modal.Sandbox.list(
            app_id=app.app_id, tags={TAG_MANAGED: "true"}, client=client)), retries=3)
        found = []
        for sandbox in sandboxes:
            with contextlib.suppress(NotFoundError):  # ended between the list and this call
                found.append((sandbox, _call("read a sandbox's tags", sandbox.get_tags, retries=3)))
        return found

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Sandboxes this provider tagged, of this owner (every owner with ``all_owners``)."""
        client = _client()
        try:
            me = owner_id()
            infos = []
            for sandbox, tags in self._mine(client):
                owner = tags.get(TAG_OWNER)
                if not owner or (not all_owners and owner != me):
                    continue
                infos.append(HandleInfo(provider=self.name, id=tags.get(TAG_ID, sandbox.object_id), owner=owner,
                                        status="running" if owner_alive(owner) else "orphaned",
                                        env=tags.get(TAG_ENV)))
            return infos
        finally:
            client.close()

    def gc(self) -> builtins.list[HandleInfo]:
        """Terminate the tagged sandboxes whose owner process is gone."""
        client = _client()
        try:
            removed = []
            for sandbox, tags in self._mine(client):
                owner = tags.get(TAG_OWNER)
                if not owner or owner_alive(owner):
                    continue
                _terminate(sandbox, 30.0)
                removed.append(HandleInfo(provider=self.name, id=tags.get(TAG_ID, sandbox.object_id), owner=owner,
                                          status="orphaned", env=tags.get(TAG_ENV)))
            return removed
        finally:
            client.close()
