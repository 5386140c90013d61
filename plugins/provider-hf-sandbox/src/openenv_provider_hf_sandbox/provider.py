"""The ``hf_sandbox`` provider: one Hugging Face Jobs sandbox per env server (``huggingface_hub.Sandbox``).

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``), on the official SDK:

* Credentials are the SDK's: ``HF_TOKEN`` or the token of ``hf auth login``. Without one, ``start``
  fails with one line naming both; a token the Hub refuses, with one line too.
* The sandbox is a dedicated HF Job (``Sandbox.create``) from ``options["image"]`` (else
  ``LaunchSpec.image``): an image with ``openenv`` and the env installed. ``flavor`` (default
  ``cpu-basic``), ``idle_timeout`` (seconds, default 600), ``namespace`` and the start timeout
  (``LaunchSpec.startup_timeout_s``) go to the SDK. The job carries the labels ``openenv-managed``,
  ``openenv-owner``, ``openenv-id`` and ``openenv-env``; ``LaunchSpec.env_vars`` go into its
  environment.
* The server runs as a background command in the sandbox (``openenv serve <env> --host 127.0.0.1
  --port <port> --allow-open``, or ``options["command"]``), its output in a log file there, and is
  reached through the Jobs proxy (``Sandbox.proxy_url_for(port)``) via a loopback relay
  (``openenv_provider_hf_sandbox.relay``) that adds the proxy's credentials and checks
  ``LaunchSpec.token`` itself: the handle's ``base_url`` is ``http://127.0.0.1:<port>``, so every
  OpenEnv client, probe and pool works unchanged. The relay lives in the process that called
  ``start``.
* ``start`` returns once the kernel's readiness probe passes through the relay; a sandbox that
  never starts (the SDK's error carries the job's log tail) or whose server never becomes ready or
  exits is cancelled before the error propagates.
* ``stop`` stops the relay and cancels the job (idempotent). ``ps`` lists running jobs by label;
  ``gc`` cancels those whose owner process is gone.

* ``pool=True``: the sandbox comes from a ``SandboxPool`` instead (many sandboxes packed on a few
  host jobs, ``sandboxes_per_host`` each, default 8): the server listens on the unix socket the
  pool's proxy reaches (``openenv serve --uds $SBX_PROXY_DIR/<port>.sock``; a pooled sandbox may
  not bind TCP ports). One pool per image, flavor and namespace in this process, named after the
  owner process; it is closed (its hosts cancelled) when its last server stops. ``ps``/``gc`` list
  and cancel pool hosts by that name.
"""

from __future__ import annotations

import builtins
import contextlib
import shlex
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import HandleInfo, LaunchSpec, Provider, owner_alive, owner_id
from openenv.remote import RemoteHandle, check_options, first_line

from .relay import Relay

__all__ = ["HFSandboxHandle", "HFSandboxProvider", "LABEL_ENV", "LABEL_ID", "LABEL_OWNER"]

LABEL_MANAGED = "openenv-managed"
LABEL_OWNER = "openenv-owner"
LABEL_ID = "openenv-id"
LABEL_ENV = "openenv-env"
OPTIONS = frozenset({"image", "flavor", "idle_timeout", "namespace", "port", "command", "probe", "pool",
                     "sandboxes_per_host"})
#: Pool names this provider gives its ``SandboxPool``s: the owner process, hex-encoded (a label
#: value), so ``ps``/``gc`` can tell whose pool host a job is.
POOL_PREFIX = "openenv-"
#: Where the server's output and exit code go inside the sandbox (read back for errors).
LOG_PATH = "/tmp/openenv-server.log"
EXIT_PATH = "/tmp/openenv-server.exit"
_TERMINAL = ("COMPLETED", "ERROR", "DELETED", "CANCELED")


def _sdk() -> Any:
    """The ``huggingface_hub`` module; one line naming what to install when the Sandbox API is missing."""
    try:
        import huggingface_hub
    except ImportError:
        raise ConfigError("The hf_sandbox provider needs huggingface_hub, which is not installed: "
                          "`pip install openenvkit-provider-hf-sandbox`.") from None
    if not hasattr(huggingface_hub, "Sandbox"):
        raise ConfigError(f"The hf_sandbox provider needs huggingface_hub>=2.4 (its Sandbox API); "
                          f"{huggingface_hub.__version__} is installed: `pip install -U huggingface_hub`.")
    return huggingface_hub


def _token() -> str:
    token = _sdk().get_token()
    if not token:
        raise ConfigError("The hf_sandbox provider needs a Hugging Face token: set HF_TOKEN, or run "
                          "`hf auth login`.")
    return str(token)


def _api() -> Any:
    return _sdk().HfApi(token=_token())


class _Pools:
    """This process's ``SandboxPool``s, one per (image, flavor, namespace), each closed when the
    last server using it stops (so no host job outlives the servers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pools: dict[tuple[str, str, str], list[Any]] = {}  # key -> [pool, users]

    def acquire(self, key: tuple[str, str, str], make: Callable[[], Any]) -> Any:
        with self._lock:
            entry = self._pools.get(key)
            if entry is None:
                entry = self._pools[key] = [make(), 0]
            entry[1] += 1
            return entry[0]

    def release(self, key: tuple[str, str, str]) -> None:
        with self._lock:
            entry = self._pools.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            del self._pools[key]
        with contextlib.suppress(Exception):
            entry[0].close()


_POOLS = _Pools()
#: Pooled servers of this process by handle id (a pooled sandbox has no job of its own to label:
#: ``ps`` lists these, and the pool hosts of other processes).
_LIVE_POOLED: dict[str, HFSandboxHandle] = {}


def _pool_owner(job: Any) -> str | None:
    """The owner process of a pool host this provider started (from its pool name), else None."""
    name = (job.labels or {}).get("hf-sandbox-pool") or ""
    if not name.startswith(POOL_PREFIX):
        return None
    try:
        return bytes.fromhex(name[len(POOL_PREFIX):]).decode()
    except ValueError:
        return None


class HFSandboxHandle(RemoteHandle):
    """An env server in a Hugging Face Jobs sandbox, reached through a loopback relay."""

    def __init__(self, *, provider: str, id: str, base_url: str, sandbox: Any, relay: Relay, env: str,
                 token: str | None, probe_mode: str, process: Any, namespace: str,
                 pool_key: tuple[str, str, str] | None = None) -> None:
        super().__init__(provider=provider, id=id, base_url=base_url, env=env, token=token, probe_mode=probe_mode)
        self.sandbox = sandbox
        self.namespace = namespace
        self.pool_key = pool_key
        self.relay = relay
        self.process = process

    def where(self) -> str:
        return f"Hugging Face sandbox {self.sandbox.id}"

    def exit_description(self) -> str | None:
        """Why the server is gone (``None`` while it runs): the job ended, or the server command exited."""
        try:
            # A pooled sandbox lives as long as its host job.
            job = _api().inspect_job(job_id=self.sandbox.host_id or self.sandbox.id, namespace=self.namespace)
        except Exception:
            return None  # cannot tell right now; the probe decides
        stage = str(getattr(job.status.stage, "value", job.status.stage))
        if stage in _TERMINAL:
            return f"is gone (its sandbox job is {stage})"
        try:
            listed = {p.id: p for p in self.sandbox.processes()}
        except Exception:
            return None
        proc = listed.get(self.process.id)
        if proc is None or proc.running:
            return None
        return f"exited with code {proc.exit_code}"

    def logs(self, tail: int = 50) -> str:
        if self._stopped:
            return ""
        try:
            result = self.sandbox.run(["tail", "-n", str(max(1, tail)), LOG_PATH], check=False, timeout=10)
        except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
            return f"(logs unavailable: {first_line(exc)})"
        return str(result.stdout) if tail > 0 else ""

    def release(self, timeout_s: float) -> None:
        self.relay.close()
        _LIVE_POOLED.pop(self.id, None)
        try:
            self.sandbox.kill()
        finally:
            if self.pool_key is not None:
                _POOLS.release(self.pool_key)


def _cancel(job_id: str, namespace: str | None = None) -> None:
    """Cancel a sandbox job by id, never raising (the caller has the real error)."""
    with contextlib.suppress(Exception):
        _api().cancel_job(job_id=job_id, namespace=namespace)


class HFSandboxProvider(Provider):
    """Env servers in Hugging Face Jobs sandboxes (see the module docstring)."""

    name: ClassVar[str] = "hf_sandbox"
    requires: ClassVar[str] = ("HF_TOKEN (or `hf auth login`) and an image with openenv and the env: its own tests "
                               "run the contract against a local stand-in of the Jobs API and sandbox server "
                               "(plugins/provider-hf-sandbox/tests)")

    def check(self, spec: LaunchSpec) -> None:
        check_options("hf_sandbox", spec.options, OPTIONS)
        if not (spec.options.get("image") or spec.image):
            raise ConfigError("The hf_sandbox provider needs an image with openenv and the env installed: "
                              "options['image'] (or LaunchSpec.image), e.g. one pushed with `openenv push`.")

    def command(self, spec: LaunchSpec) -> str:
        """The server command run in the sandbox (never carries a secret)."""
        opts = spec.options
        if opts.get("command"):
            return str(opts["command"])
        port = int(opts.get("port", 8000))
        # A pooled sandbox may not bind TCP ports: its server listens where the pool's proxy looks,
        # $SBX_PROXY_DIR/<port>.sock (expanded by the sandbox's shell).
        where = ["--uds", f"$SBX_PROXY_DIR/{port}.sock"] if opts.get("pool") else \
            ["--host", "127.0.0.1", "--port", str(port)]
        args = [shlex.quote(a) for a in ["openenv", "serve", spec.env]]
        args += [f'"{a}"' if a.startswith("$") else shlex.quote(a) for a in where]
        return " ".join([*args, *(shlex.quote(a) for a in [
            *spec.max_sessions_args(), "--mode", spec.mode,
            # Reached only through the Jobs proxy (the caller's HF token and the sandbox token) and
            # the caller's loopback relay, which checks LaunchSpec.token.
            "--allow-open"])])

    def start(self, spec: LaunchSpec) -> HFSandboxHandle:
        self.check(spec)
        hub = _sdk()
        from huggingface_hub import errors

        token = _token()
        opts = spec.options
        image = str(opts.get("image") or spec.image)
        server_id = f"hfsbx-{uuid.uuid4().hex[:12]}"
        labels = {LABEL_MANAGED: "true", LABEL_OWNER: owner_id(), LABEL_ID: server_id, LABEL_ENV: spec.env}
        started = time.monotonic()
        try:
            # The namespace is asked once (the SDK's own calls without one would ask the Hub each time).
            namespace = str(opts.get("namespace") or hub.HfApi(token=token).whoami()["name"])
            flavor = str(opts.get("flavor", "cpu-basic"))
            env_vars = {str(k): str(v) for k, v in spec.env_vars.items()}
            if opts.get("pool"):
                pool_key = (image, flavor, namespace)
                pool = _POOLS.acquire(pool_key, lambda: hub.SandboxPool(
                    image=image, flavor=flavor, sandboxes_per_host=int(opts.get("sandboxes_per_host", 8)),
                    name=POOL_PREFIX + owner_id().encode().hex(), idle_timeout=opts.get("idle_timeout", 600),
                    namespace=namespace, start_timeout=spec.startup_timeout_s, token=token))
                try:
                    sandbox = pool.create(env=env_vars, idle_timeout=opts.get("idle_timeout", 600))
                except BaseException:
                    _POOLS.release(pool_key)
                    raise
            else:
                pool_key = None
                sandbox = hub.Sandbox.create(
                    image=image, flavor=flavor, idle_timeout=opts.get("idle_timeout", 600), env=env_vars,
                    labels=labels, namespace=namespace, start_timeout=spec.startup_timeout_s, token=token)
        except errors.HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if status in (401, 403):
                raise ConfigError(f"The Hugging Face Hub refused the token while creating a sandbox "
                                  f"({first_line(exc)}): set HF_TOKEN to a valid token, or run `hf auth "
                                  "login`.") from None
            raise RuntimeError(f"The Hub could not create a sandbox from image '{image}' for "
                               f"'{spec.env}': {first_line(exc)}.") from None
        except errors.SandboxError as exc:
            # The SDK cancelled the job already; its message carries the job's log tail.
            raise RuntimeError(f"The sandbox for '{spec.env}' (image '{image}') did not start: {exc}") from None
        relay: Relay | None = None
        try:
            port = int(opts.get("port", 8000))
            # The subshell keeps a command's own `;` or `exit` from skipping the log redirect and the
            # exit-code record, so a server that dies is reported with its code and output.
            line = f"({self.command(spec)}\n) > {LOG_PATH} 2>&1; echo $? > {EXIT_PATH}"
            process = sandbox.run(line, shell=True, background=True)
            relay = Relay(sandbox.proxy_url_for(port), lambda: sandbox.proxy_headers, token=spec.token)
            handle = HFSandboxHandle(provider=self.name, id=server_id, base_url=relay.start(), sandbox=sandbox,
                                     relay=relay, env=spec.env, token=spec.token,
                                     probe_mode=str(opts.get("probe", "auto")), process=process,
                                     namespace=namespace, pool_key=pool_key)
            if pool_key is not None:
                _LIVE_POOLED[handle.id] = handle
            handle.wait_ready(max(1.0, spec.startup_timeout_s - (time.monotonic() - started)))
        except BaseException:
            _LIVE_POOLED.pop(server_id, None)
            if relay is not None:
                relay.close()
            with contextlib.suppress(Exception):
                sandbox.kill()
            if pool_key is not None:
                _POOLS.release(pool_key)
            raise
        return handle

    def _ours(self) -> builtins.list[tuple[Any, str, str, str | None]]:
        """Running jobs this provider started in the token's own namespace, as (job, id, owner, env):
        dedicated sandboxes (by label) and pool hosts (by pool name)."""
        api = _api()
        namespace = api.whoami()["name"]
        found = []
        for job in api.list_jobs(labels={LABEL_MANAGED: "true"}, namespace=namespace):
            labels = job.labels or {}
            if labels.get(LABEL_OWNER):
                found.append((job, labels.get(LABEL_ID, job.id), labels[LABEL_OWNER], labels.get(LABEL_ENV)))
        me = owner_id()
        for job in api.list_jobs(labels={"hf-sandbox-mode": "pool"}, namespace=namespace):
            owner = _pool_owner(job)
            if owner is not None and owner != me:  # this process's pools: their servers are listed instead
                found.append((job, job.id, owner, None))
        return [f for f in found if str(getattr(f[0].status.stage, "value", f[0].status.stage)) not in _TERMINAL]

    def ps(self, *, all_owners: bool = False) -> builtins.list[HandleInfo]:
        """Running sandbox jobs (and pool hosts) this provider started, of this owner (every owner
        with ``all_owners``)."""
        me = owner_id()
        pooled = [HandleInfo(provider=self.name, id=h.id, owner=me, status="running", env=h.env)
                  for h in list(_LIVE_POOLED.values()) if h.is_running()]
        return pooled + [HandleInfo(provider=self.name, id=ident, owner=owner,
                                    status="running" if owner_alive(owner) else "orphaned", env=env)
                         for _, ident, owner, env in self._ours() if all_owners or owner == me]

    def gc(self) -> builtins.list[HandleInfo]:
        """Cancel the sandbox jobs (and pool hosts) this provider started whose owner process is gone."""
        removed = []
        for job, ident, owner, env in self._ours():
            if owner_alive(owner):
                continue
            _cancel(job.id, job.owner.name if job.owner else None)
            removed.append(HandleInfo(provider=self.name, id=ident, owner=owner, status="orphaned", env=env))
        return removed
