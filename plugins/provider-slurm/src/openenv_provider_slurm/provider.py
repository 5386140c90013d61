"""The ``slurm`` provider: ``openenv serve`` as a Slurm batch job, reached on 127.0.0.1.

For researchers whose compute is a Slurm allocation. ``start`` submits one job (``sbatch``) that
runs ``options["pool"]`` servers (default 1) in one allocation, each bound to 127.0.0.1 on a free
port that it writes to a ready file in the job's folder on a disk shared with this machine
(``options["shared_dir"]``, default ``<state dir>/slurm``). ``start`` waits for the ready files,
then for the servers' readiness, and returns a handle whose ``base_url`` is the first server
(``handle.base_urls``: all of them). The servers bind 127.0.0.1, so they are reached from the
node the job runs on: a one-node cluster, or this machine inside the allocation (``salloc``); for
a login node reaching a compute node, forward the port over ssh (not done here).

Job options: ``partition``, ``time_limit`` (sbatch ``--time``), ``account``, ``cpus``
(``--cpus-per-task``), ``memory`` (``--mem``), ``pool``, ``sbatch_args`` (extra sbatch
arguments), ``python`` (the interpreter that runs ``openenv serve`` on the node: default this one,
so the job runs this workspace's ``openenv``), ``pending_timeout_s`` (default: the whole
``startup_timeout_s``).

CPUs and memory come from the env manifest's ``resources:`` (docs/manifest.md) unless the options
give them: ``resources.cpu`` (a number, or a Kubernetes quantity such as ``"500m"``) rounded up to
whole CPUs, and ``resources.memory_mb`` (MiB) or ``resources.memory`` (a quantity such as
``"256Mi"``). Without either, 1 CPU and 1 GiB. The whole pool shares one allocation of that size.

Errors, each with nothing left behind (the job is cancelled before raising):

* no ``sbatch`` here, or a controller that does not answer: ``EngineUnavailable``, one line
  naming what to install or start;
* a job still pending at ``pending_timeout_s``: ``TimeoutError`` with squeue's reason;
* a job that ends (cancelled, failed, the server exited) before it is ready: ``RuntimeError``
  with its state and log tail.

Secrets (``LaunchSpec.env_vars``, ``token``) reach the job through sbatch's exported environment,
never its argv or the job script. ``ps``/``gc`` find jobs by name (``openenv-…``) and by the owner
written into the job's comment; ``gc`` cancels those whose owner process is gone. A handle's jobs
are cancelled when this process exits normally, unless ``options["detach"]``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import getpass
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import (
    EngineUnavailable,
    HandleInfo,
    LaunchSpec,
    Provider,
    ProviderHandle,
    owner_alive,
    owner_id,
)
from openenv.readiness import MODES, log_tail_text, wait_until_ready
from openenv_provider_local.base import COMMON_OPTIONS, tail_file
from openenv_provider_local.records import state_dir

__all__ = ["DEFAULT_CPUS", "DEFAULT_MEMORY_MB", "JOB_PREFIX", "SlurmHandle", "SlurmProvider", "job_resources",
           "manifest_resources", "slurm_available"]

#: Every job this provider submits is named ``openenv-<hex>``: what ``ps``/``gc`` look for.
JOB_PREFIX = "openenv-"
SLURM_OPTIONS = frozenset({"partition", "time_limit", "account", "cpus", "memory", "pool", "sbatch_args",
                           "python", "pending_timeout_s", "shared_dir"})
#: Job states after which a job never runs again.
ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY",
                   "PREEMPTED", "TIMEOUT", "GONE"})

_LIVE: weakref.WeakSet[SlurmHandle] = weakref.WeakSet()


def _run(argv: list[str], *, timeout_s: float = 20.0,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env,
                          stdin=subprocess.DEVNULL, check=False)


#: What a job asks for when neither the options nor the env's manifest say: 1 CPU, 1 GiB.
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 1024

_QUANTITY_SUFFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                    "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3, "Ti": 1024.0 ** 4}


def manifest_resources(env: str) -> dict[str, Any]:
    """The ``resources:`` mapping of the installed env's ``openenv.yaml``; ``{}`` for a
    ``module:Class`` env, an env without a manifest or a manifest without ``resources:``."""
    if ":" in env:
        return {}
    from openenv.manifest import load_manifest, locate_manifest
    from openenv.plugins import get_plugin_manager

    raw = get_plugin_manager().catalog.envs.get(env).extra.get("manifest")
    if not raw:
        return {}
    resources = (load_manifest(locate_manifest(raw)).model_extra or {}).get("resources")
    return dict(resources) if isinstance(resources, dict) else {}


def job_resources(spec: LaunchSpec) -> tuple[int, int, str]:
    """``(cpus, memory in MiB, where they came from)`` for sbatch's ``--cpus-per-task``/``--mem``:
    ``options["cpus"]``/``options["memory"]`` win, then the manifest's ``resources:``, then
    1 CPU / 1 GiB. Raises ``ConfigError`` naming the bad option or manifest field."""
    opts = spec.options
    from_manifest = manifest_resources(spec.env) if "cpus" not in opts or "memory" not in opts else {}
    sources = []
    if "cpus" in opts:
        cpus = opts["cpus"]
        if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 1:
            raise ConfigError(f"Provider 'slurm': options['cpus'] = {cpus!r} must be a whole number >= 1 "
                              "(sbatch --cpus-per-task).")
    elif from_manifest.get("cpu") is not None:
        # Slurm allocates whole CPUs: a fraction (0.1, "500m") still needs one.
        cpus = max(1, math.ceil(_quantity(from_manifest["cpu"], "resources.cpu", cpu=True) - 1e-9))
        sources.append(f"cpu {from_manifest['cpu']!r}")
    else:
        cpus = DEFAULT_CPUS
    if "memory" in opts:
        memory_mb = _mem_mb(opts["memory"])
    else:
        memory, mb = from_manifest.get("memory"), from_manifest.get("memory_mb")
        if memory is not None and mb is not None:
            raise ConfigError(f"Provider 'slurm': the env manifest of '{spec.env}' gives both resources.memory "
                              f"({memory!r}) and resources.memory_mb ({mb!r}): keep one.")
        if mb is not None:
            if isinstance(mb, bool) or not isinstance(mb, int | float) or mb <= 0:
                raise ConfigError(f"Provider 'slurm': the env manifest of '{spec.env}' has resources.memory_mb = "
                                  f"{mb!r}: it must be a positive number of MiB.")
            memory_mb = math.ceil(mb)
            sources.append(f"memory_mb {mb!r}")
        elif memory is not None:
            memory_mb = math.ceil(_quantity(memory, "resources.memory") / 1024 ** 2)
            sources.append(f"memory {memory!r}")
        else:
            memory_mb = DEFAULT_MEMORY_MB
    origin = f"from the env manifest's resources ({', '.join(sources)})" if sources else "from the options/defaults"
    return int(cpus), max(1, memory_mb), origin


def _quantity(value: Any, field: str, *, cpu: bool = False) -> float:
    """A Kubernetes-style quantity (``2``, ``0.5``, ``"500m"``, ``"256Mi"``, ``"1G"``) as a number."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    text = str(value).strip()
    number = text.rstrip("kMGTi")
    suffix = text[len(number):]
    if cpu and suffix == "" and number.endswith("m"):
        number, scale = number[:-1], 1e-3  # millicores
    elif suffix in _QUANTITY_SUFFIX:
        scale = _QUANTITY_SUFFIX[suffix]
    else:
        scale = -1.0
    try:
        result = float(number) * scale
    except ValueError:
        result = -1.0
    if isinstance(value, bool) or result <= 0:
        example = "1, 0.5 or '500m'" if cpu else "'256Mi' or '1Gi' (or memory_mb: 256)"
        raise ConfigError(f"Provider 'slurm': the env manifest's {field} = {value!r} is not a positive quantity: "
                          f"write e.g. {example}, or override it with options['{'cpus' if cpu else 'memory'}'].")
    return result


def slurm_available() -> None:
    """Raise ``EngineUnavailable`` (one line: what to install or start) unless the Slurm client
    commands are here and the controller answers."""
    missing = [c for c in ("sbatch", "squeue", "scancel", "sinfo") if not shutil.which(c)]
    if missing:
        raise EngineUnavailable(
            f"Provider 'slurm': Slurm's client commands are not installed (no {missing[0]} on PATH). Install "
            "them (`apt-get install slurm-client`, or `module load slurm` on a cluster) and point "
            "SLURM_CONF at the cluster's slurm.conf.")
    try:
        out = _run(["sinfo", "-h", "-o", "%T"], timeout_s=20.0)
    except subprocess.TimeoutExpired:
        out = subprocess.CompletedProcess([], 1, "", "sinfo did not answer within 20s")
    if out.returncode != 0:
        said = (out.stderr.strip().splitlines() or [f"sinfo exited with {out.returncode}"])[-1]
        raise EngineUnavailable(
            f"Provider 'slurm': the Slurm controller does not answer ({said}). Start slurmctld and slurmd "
            "(`systemctl start slurmctld slurmd`, or `.ci/slurm-setup.sh start` for a one-node test "
            "cluster) or check SLURM_CONF.")


def _job_state(job_id: str) -> tuple[str, str]:
    """(state, reason) of a job from squeue; ``("GONE", "")`` once squeue no longer knows it."""
    out = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
    line = out.stdout.strip().splitlines()
    if out.returncode != 0 or not line:
        # squeue may have dropped a just-finished job; the controller keeps it for MinJobAge.
        shown = _run(["scontrol", "-o", "show", "job", job_id]).stdout
        for field in shown.split():
            if field.startswith("JobState="):
                return field.split("=", 1)[1], ""
        return "GONE", ""
    state, _, reason = line[0].partition("|")
    return state.strip(), reason.strip()


def _cancel(job_id: str, *, wait_s: float = 15.0) -> bool:
    """``scancel`` a job and wait (bounded) until it has left the running states."""
    _run(["scancel", job_id])
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        state, _ = _job_state(job_id)
        if state in ENDED:
            return True
        time.sleep(0.2)
    return False


class SlurmHandle(ProviderHandle):
    """A Slurm job serving ``pool`` env servers; ``base_url`` is the first of ``base_urls``."""

    def __init__(self, *, job_id: str, base_urls: list[str], job_dir: Path, env: str, token: str | None,
                 probe_mode: str, keep_logs: bool) -> None:
        super().__init__(provider="slurm", id=job_id, base_url=base_urls[0])
        self.job_id, self.base_urls, self.job_dir, self.env = job_id, base_urls, job_dir, env
        self._token, self._probe_mode, self._keep_logs = token, probe_mode, keep_logs
        self._lock = threading.Lock()
        self._stopped = False
        self._final_tail: str | None = None

    @property
    def log_path(self) -> Path:
        return self.job_dir / "job.log"

    def __repr__(self) -> str:
        return f"<SlurmHandle job {self.job_id} env={self.env!r} urls={self.base_urls}>"

    def is_running(self) -> bool:
        return not self._stopped and _job_state(self.job_id)[0] == "RUNNING"

    def logs(self, tail: int = 50) -> str:
        if self._final_tail is not None:
            return "\n".join(self._final_tail.splitlines()[-tail:]) if tail > 0 else ""
        return tail_file(self.log_path, tail)

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for url in self.base_urls:
            wait_until_ready(url, timeout_s=max(0.0, deadline - time.monotonic()), token=self._token,
                             mode=self._probe_mode, exited=self._ended,
                             log_tail=functools.partial(tail_file, self.log_path, 30), log_source=str(self.log_path),
                             what=f"env server '{self.env}' (Slurm job {self.job_id})")

    def _ended(self) -> str | None:
        state, _ = _job_state(self.job_id)
        return f"ended ({state})" if state in ENDED else None

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            _cancel(self.job_id, wait_s=max(timeout_s, 5.0))
            self._final_tail = tail_file(self.log_path, 200)
            if not self._keep_logs:
                shutil.rmtree(self.job_dir, ignore_errors=True)
            _LIVE.discard(self)


@atexit.register
def _cancel_live_jobs() -> None:
    for handle in list(_LIVE):
        with contextlib.suppress(Exception):
            handle.stop(timeout_s=5.0)


class SlurmProvider(Provider):
    """Env servers as Slurm batch jobs on 127.0.0.1 of the node they run on."""

    name: ClassVar[str] = "slurm"
    requires: ClassVar[str] = ("a Slurm cluster (sbatch/squeue/scancel/sinfo and a controller) sharing a disk with "
                               "this machine; its own tests start a one-node cluster with .ci/slurm-setup.sh")

    # -- start ------------------------------------------------------------------------------------

    def check(self, spec: LaunchSpec) -> None:
        from openenv.errors import did_you_mean

        known = sorted(COMMON_OPTIONS | SLURM_OPTIONS)
        for key in sorted(set(spec.options) - set(known)):
            raise ConfigError(f"Unknown option '{key}' for provider 'slurm'.{did_you_mean(key, known)} "
                              f"Accepted options: {', '.join(known)}.")
        opts = spec.options
        pool = opts.get("pool", 1)
        if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
            raise ConfigError(f"Provider 'slurm': options['pool'] = {pool!r} must be a whole number >= 1 "
                              "(servers in one allocation).")
        if opts.get("probe", "auto") not in MODES:
            raise ConfigError(f"Unknown probe mode {opts['probe']!r} (options['probe']): use one of "
                              f"{', '.join(MODES)}.")
        # Also looks the env up (an unknown name fails here, with did-you-mean).
        job_resources(spec)
        slurm_available()

    def start(self, spec: LaunchSpec) -> SlurmHandle:
        self.check(spec)
        opts = spec.options
        pool = int(opts.get("pool", 1))
        job_name = f"{JOB_PREFIX}{uuid.uuid4().hex[:12]}"
        shared = Path(opts.get("shared_dir") or state_dir() / "slurm")
        job_dir = shared / job_name
        job_dir.mkdir(parents=True, mode=0o700)
        script = job_dir / "job.sh"
        script.write_text(self._script(spec, job_dir, pool), encoding="utf-8")
        comment = f"openenv;owner={owner_id()};env={spec.env};dir={job_dir}"
        cpus, memory_mb, origin = job_resources(spec)
        argv = ["sbatch", "--parsable", f"--job-name={job_name}", f"--comment={comment}",
                f"--output={job_dir / 'job.log'}", f"--cpus-per-task={cpus}",
                f"--mem={memory_mb}M", f"--chdir={opts.get('cwd') or os.getcwd()}",
                "--export=ALL", "--kill-on-invalid-dep=yes"]
        for key, flag in (("partition", "--partition"), ("time_limit", "--time"), ("account", "--account")):
            if opts.get(key):
                argv.append(f"{flag}={opts[key]}")
        extra = opts.get("sbatch_args") or []
        argv += shlex.split(extra) if isinstance(extra, str) else [str(a) for a in extra]
        out = _run([*argv, str(script)], env=self._job_environment(spec))
        if out.returncode != 0:
            shutil.rmtree(job_dir, ignore_errors=True)
            said = " ".join(out.stderr.split()) or f"exit code {out.returncode}"
            raise RuntimeError(f"Provider 'slurm': sbatch refused the job for env '{spec.env}' ({said}); it asked for "
                               f"{cpus} CPUs and {memory_mb} MiB {origin}. Ask for resources the partition has "
                               "(options cpus/memory/partition/time_limit).")
        job_id = out.stdout.strip().split(";")[0]
        try:
            urls = self._await_ports(job_id, job_dir, pool, spec)
            handle = SlurmHandle(job_id=job_id, base_urls=urls, job_dir=job_dir, env=spec.env, token=spec.token,
                                 probe_mode=str(opts.get("probe", "auto")),
                                 keep_logs=bool(opts.get("keep_logs", False)))
        except BaseException:
            _cancel(job_id)
            raise
        if not opts.get("detach"):
            _LIVE.add(handle)
        try:
            handle.wait_ready(max(1.0, spec.startup_timeout_s))
        except BaseException:
            handle._keep_logs = True
            handle.stop(timeout_s=5.0)
            raise
        return handle

    def _script(self, spec: LaunchSpec, job_dir: Path, pool: int) -> str:
        python = str(spec.options.get("python") or sys.executable)
        lines = ["#!/bin/sh", "# Written by openenv's slurm provider: one `openenv serve` per pool slot."]
        for slot in range(pool):
            serve = [python, "-m", "openenv", "serve", *self._serve_args(spec, job_dir / f"ready-{slot}")]
            lines.append(("exec " if pool == 1 else "") + shlex.join(serve) + ("" if pool == 1 else " &"))
        if pool > 1:
            lines.append("wait")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _serve_args(spec: LaunchSpec, ready_file: Path) -> list[str]:
        opts = spec.options
        args = [spec.env, "--host", "127.0.0.1", "--port", "0", "--ready-file", str(ready_file),
                *spec.max_sessions_args(), "--mode", spec.mode, "--log-level", str(opts.get("log_level", "info"))]
        transports = opts.get("transports")
        for t in [transports] if isinstance(transports, str) else transports or []:
            args += ["--transport", str(t)]
        if opts.get("step_timeout_s") is not None:
            args += ["--step-timeout", str(float(opts["step_timeout_s"]))]
        if opts.get("idle_timeout_s") is not None:
            args += ["--idle-timeout", str(float(opts["idle_timeout_s"]))]
        return args

    @staticmethod
    def _job_environment(spec: LaunchSpec) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("OPENENV_TOKEN", None)
        env.pop("OPENENV_DIE_WITH_PARENT", None)  # the job's parent is slurmstepd, not us
        env.update({str(k): str(v) for k, v in spec.env_vars.items()})
        if spec.token:
            env["OPENENV_TOKEN"] = spec.token
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def _await_ports(self, job_id: str, job_dir: Path, pool: int, spec: LaunchSpec) -> list[str]:
        """Wait for every slot's ready file, watching the job's state (bounded by the spec)."""
        started = time.monotonic()
        deadline = started + spec.startup_timeout_s
        pending_limit = started + float(spec.options.get("pending_timeout_s", spec.startup_timeout_s))
        log_path = job_dir / "job.log"
        urls: dict[int, str] = {}
        next_poll = 0.0
        while True:
            for slot in range(pool):
                if slot not in urls:
                    with contextlib.suppress(OSError, ValueError, KeyError):
                        data = json.loads((job_dir / f"ready-{slot}").read_text(encoding="utf-8"))
                        urls[slot] = f"http://127.0.0.1:{int(data['port'])}"
            if len(urls) == pool:
                return [urls[s] for s in range(pool)]
            now = time.monotonic()
            if now >= next_poll:
                next_poll = now + 0.5
                state, reason = _job_state(job_id)
                if state in ENDED:
                    raise RuntimeError(
                        f"Provider 'slurm': job {job_id} for env '{spec.env}' ended ({state}) before its "
                        f"server was ready.{log_tail_text(functools.partial(tail_file, log_path, 30), str(log_path))}")
                if state == "PENDING" and now >= min(pending_limit, deadline):
                    raise TimeoutError(
                        f"Provider 'slurm': job {job_id} for env '{spec.env}' was not scheduled within "
                        f"{now - started:.0f}s (squeue: PENDING, reason {reason or 'unknown'}); it was cancelled. "
                        "Ask for fewer resources, another partition, or a longer pending_timeout_s.")
            if now >= deadline:
                raise TimeoutError(
                    f"Provider 'slurm': job {job_id} for env '{spec.env}' was not ready within "
                    f"{spec.startup_timeout_s:g}s ({len(urls)}/{pool} servers said where they listen); it was "
                    f"cancelled.{log_tail_text(functools.partial(tail_file, log_path, 30), str(log_path))}")
            time.sleep(0.05)

    # -- bookkeeping ------------------------------------------------------------------------------

    def _jobs(self) -> list[tuple[HandleInfo, str]]:
        slurm_available()
        out = _run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i|%j|%T|%k"])
        jobs = []
        for line in out.stdout.splitlines():
            job_id, name, state, comment = (line.split("|", 3) + ["", "", ""])[:4]
            if not name.startswith(JOB_PREFIX) or state in ENDED or not comment.startswith("openenv;"):
                continue
            fields = dict(part.split("=", 1) for part in comment.split(";")[1:] if "=" in part)
            url = None
            with contextlib.suppress(OSError, ValueError, KeyError):
                data = json.loads((Path(fields.get("dir", "")) / "ready-0").read_text(encoding="utf-8"))
                url = f"http://127.0.0.1:{int(data['port'])}"
            info = HandleInfo(provider=self.name, id=job_id, owner=fields.get("owner", ""), base_url=url,
                              status=state.lower(), env=fields.get("env"))
            jobs.append((info, fields.get("dir", "")))
        return jobs

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        me = owner_id()
        return [info for info, _ in self._jobs() if all_owners or info.owner == me]

    def gc(self) -> list[HandleInfo]:
        removed = []
        for info, job_dir in self._jobs():
            if owner_alive(info.owner):
                continue
            if _cancel(info.id):
                if job_dir and Path(job_dir).name.startswith(JOB_PREFIX):
                    shutil.rmtree(job_dir, ignore_errors=True)
                info.status = "orphaned"
                removed.append(info)
        return removed


def _mem_mb(value: Any) -> int:
    """MiB for sbatch ``--mem`` from ``options["memory"]``: ``"1g"``, ``"512m"`` or MiB as an int."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip().lower().removesuffix("b").removesuffix("i")
    units = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
    try:
        number, unit = (float(text[:-1]), text[-1]) if text[-1:] in units else (float(text), "m")
    except ValueError:
        number = -1.0
        unit = "m"
    if number <= 0:
        raise ConfigError(f"Provider 'slurm': options['memory'] = {value!r} is not a size: use megabytes or a "
                          "number with k, m, g or t (e.g. '2g'); it becomes sbatch --mem.")
    return max(1, math.ceil(number * units[unit]))
