"""The ``openenv`` command line as a test sees it: a served child process, a clean ``run``,
README snippets and plugin registration (``openenv.testing``).

::

    from openenv.testing import check_registered, readme_snippets, run_cli, served_cli

    def test_served(tmp_path):
        with served_cli("maze", tmp_path=tmp_path, max_sessions=4) as url:
            ...  # http://127.0.0.1:<port>

    def test_run(tmp_path):
        done = run_cli("run", "maze", "--episodes", "2", "--seed", "1", tmp_path=tmp_path)
        assert done.returncode == 0, done.stderr

* ``served_cli(name, *, tmp_path, **flags)`` – ``openenv serve NAME`` in a child process bound to
  127.0.0.1 on a free port, ready when its ``--ready-file`` is written; yields the base URL. Keyword
  flags become options (``max_sessions=4`` -> ``--max-sessions 4``, ``True`` -> a bare flag). On
  exit the child's whole process group gets SIGTERM (SIGKILL if it lingers); the server's log is
  attached to any failure, in start-up or in the ``with`` body.
* ``run_cli(*args, tmp_path, timeout=...)`` – ``python -m openenv ARGS`` with a clean environment:
  no ``OPENENV_TOKEN``/``OPENENV_MODE``, ``OPENENV_STATE_DIR=tmp_path``, wide ``COLUMNS``, no colour.
* ``replay_run(stdout, env, seed=...)`` – replays that ``run`` transcript on ``env`` in this process,
  checking every action the CLI sent was a legal one.
* ``readme_snippets(path)`` – the fenced ``python`` blocks of a Markdown file;
  ``exec_snippet(source, filename=...)`` runs one in this process (returns its namespace),
  ``run_snippet(source)`` in a fresh interpreter (returns the finished process).
* ``check_registered(plugin_module, name, ref)`` – the plugin registers env ``name`` lazily (as the
  text ``ref``, not yet imported), the ref loads, and the manifest it names reads with ``name:``.
* ``cli_imports(*args)`` – the modules ``python -m openenv ARGS`` imported, read as that fresh
  interpreter exits; ``check_cli_imports(args, loaded=..., forbidden=...)`` checks a plugin's hook
  module was among them and no module matching ``forbidden`` (a vendor SDK, the plugin's internals)
  was. ``LISTINGS`` are the commands that must stay light: ``--help``, ``plugins list``,
  ``providers list``.

Failures raise ``ContractError`` (or ``RuntimeError`` for a server that never became ready), so
nothing here needs pytest.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.testing.errors import ContractError, expect
from openenv.testing.processes import restore_default_signals

if TYPE_CHECKING:
    from openenv.manifest import Manifest
    from openenv.registry import EnvEntry

__all__ = [
    "LISTINGS",
    "check_cli_imports",
    "check_registered",
    "cli_env",
    "cli_imports",
    "exec_snippet",
    "readme_snippets",
    "replay_run",
    "run_cli",
    "run_snippet",
    "served_cli",
]

#: Variables that would change what the CLI does (a token to send, a mode to enforce).
_DROPPED = ("OPENENV_TOKEN", "OPENENV_MODE")
_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```", flags=re.S | re.M)


def cli_env(tmp_path: str | os.PathLike[str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment, cleaned for a CLI child: no token or mode, state under
    ``tmp_path``, 200 columns, no colour; ``extra`` is applied last."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env.update(OPENENV_STATE_DIR=str(tmp_path), COLUMNS="200", NO_COLOR="1", TERM="dumb")
    env.update(extra or {})
    return env


def run_cli(*args: str, tmp_path: str | os.PathLike[str], timeout: float = 120.0,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m openenv ARGS`` in a clean environment (see ``cli_env``); returns the finished
    process with text ``stdout``/``stderr``. Raises ``subprocess.TimeoutExpired`` after ``timeout``."""
    return subprocess.run([sys.executable, "-m", "openenv", *args], capture_output=True, text=True,
                          timeout=timeout, env=cli_env(tmp_path, env), check=False)


def _options(flags: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in flags.items():
        option = "--" + key.replace("_", "-")
        if value is True:
            out.append(option)
        elif value is not None and value is not False:
            out += [option, str(value)]
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
    except ProcessLookupError:  # the group is already gone
        proc.wait(timeout=15)


@contextmanager
def served_cli(name: str, *, tmp_path: str | os.PathLike[str], timeout: float = 60.0,
               env: Mapping[str, str] | None = None, **flags: Any) -> Iterator[str]:
    """``openenv serve NAME --host 127.0.0.1 --port 0 --ready-file ...`` in its own process group;
    yields ``http://127.0.0.1:<port>`` once the ready file is written (``timeout`` seconds at most)."""
    for fixed in ("host", "port", "ready_file"):
        if fixed in flags:
            raise ValueError(f"served_cli sets --{fixed.replace('_', '-')} itself (127.0.0.1, a free "
                             f"port, a ready file under tmp_path): drop the {fixed}= argument")
    workdir = Path(tempfile.mkdtemp(prefix=f"serve-{name}-", dir=tmp_path))
    ready, log = workdir / "ready.json", workdir / "server.log"
    command = [sys.executable, "-m", "openenv", "serve", name, "--host", "127.0.0.1", "--port", "0",
               "--ready-file", str(ready), *_options(flags)]
    with log.open("wb") as errors:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors,
                                start_new_session=True, preexec_fn=restore_default_signals,
                                env=cli_env(tmp_path, env))
    try:
        info: Any = None
        deadline = time.monotonic() + timeout
        while info is None and proc.poll() is None and time.monotonic() < deadline:
            try:
                info = json.loads(ready.read_text(encoding="utf-8"))
            except (OSError, ValueError):  # not written yet, or half written
                time.sleep(0.05)
        if not isinstance(info, dict) or "port" not in info:
            why = (f"exited with code {proc.returncode}" if proc.poll() is not None
                   else f"wrote no ready file within {timeout:g}s")
            raise RuntimeError(f"`openenv serve {name}` {why}; its log:\n{_tail(log)}")
        try:
            yield f"http://127.0.0.1:{int(info['port'])}"
        except Exception as exc:
            exc.add_note(f"`openenv serve {name}` log:\n{_tail(log)}")
            raise
    finally:
        _stop(proc)


def _tail(log: Path, limit: int = 8000) -> str:
    text = log.read_text(encoding="utf-8", errors="replace")
    return text if len(text) <= limit else "...\n" + text[-limit:]


def replay_run(stdout: str, env: Any, *, seed: int) -> list[tuple[str, Any]]:
    """Replay in this process, on ``env``, the transcript of ``openenv run ... --seed SEED``: episode
    N resets with ``seed=SEED + N - 1`` (as the CLI seeds it) and every printed action must be one of
    the observation's ``legal_actions`` (when the env lists them: whole actions, or the values of a
    one-field action) before it is stepped. Returns
    ``(line, observation)`` for each reset and step line, for env-specific checks of the line.
    ``env`` stays the caller's: close it afterwards."""
    action_type = env.action_type
    out: list[tuple[str, Any]] = []
    obs: Any = None
    for line in stdout.splitlines():
        if line.startswith("episode ") and "  reset  " in line:
            obs = env.reset(seed=seed + int(line.split()[1]) - 1)
        elif line.startswith("  step "):
            expect(obs is not None, f"a step before any reset in the transcript: {line}")
            action = json.loads(line.split("  action ", 1)[1].split("  reward ", 1)[0])
            legal = getattr(obs, "legal_actions", None)
            # Envs list legal actions whole ({"column": 3}) or, for a one-field action, by value (3).
            listed = legal is None or action in legal or (len(action) == 1 and next(iter(action.values())) in legal)
            expect(listed, f"the CLI sent an action the env does not list as legal: {line}")
            obs = env.step(action_type(**action))
        else:
            continue
        out.append((line, obs))
    return out


# -- README snippets ------------------------------------------------------------------------------


def readme_snippets(path: str | os.PathLike[str]) -> list[str]:
    """The fenced ```` ```python ```` blocks of the Markdown file at ``path``, in order."""
    return _FENCE.findall(Path(path).read_text(encoding="utf-8"))


def exec_snippet(source: str, *, filename: str | os.PathLike[str] = "<snippet>") -> dict[str, Any]:
    """Run ``source`` in this process in a fresh namespace and return that namespace."""
    namespace: dict[str, Any] = {"__name__": "__snippet__"}
    exec(compile(source, str(filename), "exec"), namespace)
    return namespace


def run_snippet(source: str, *, timeout: float = 120.0, ignore_warnings: bool = False,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``source`` with ``python -c`` in a fresh interpreter (``-W ignore`` when asked)."""
    command = [sys.executable, *(["-W", "ignore"] if ignore_warnings else []), "-c", source]
    merged = None if env is None else {**os.environ, **env}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=merged, check=False)


# -- plugin registration ----------------------------------------------------------------------------


def check_registered(plugin_module: Any, name: str, ref: str) -> tuple[EnvEntry, Manifest]:
    """Register ``plugin_module`` alone (no entry points) and check it declares env ``name`` lazily as
    ``ref`` (``"pkg.mod:Class"``), that the ref loads, and that its manifest reads and is ``name``.
    Returns the catalogue entry and the manifest for further, env-specific checks."""
    from openenv.manifest import load_manifest, locate_manifest
    from openenv.plugins import PluginManager
    from openenv.registry import load_ref

    pm = PluginManager(entry_points=[], strict=True)
    pm.register(plugin_module, name=name)
    try:
        entry = pm.catalog.envs.get(name)
    except Exception as exc:
        raise ContractError(f"plugin {getattr(plugin_module, '__name__', plugin_module)!r} does not "
                            f"register an env named {name!r}: {exc}") from exc
    expect(entry.ref == ref, f"env {name!r} is registered as {entry.ref!r}, not {ref!r}: register the "
                             "\"module:Class\" text so the catalogue imports nothing until it is used")
    expect(entry._loaded is None, f"env {name!r} was imported at registration; register it lazily by ref")
    loaded = entry.load()
    expect(loaded is load_ref(ref), f"env {name!r} loaded {loaded!r}, not the object at {ref!r}")
    path = entry.extra.get("manifest") or entry.manifest
    if not path:
        raise ContractError(f"env {name!r} is registered without a manifest: pass manifest=\"pkg:openenv.yaml\"")
    manifest = load_manifest(locate_manifest(path))
    expect(manifest.name == name, f"the manifest at {path} is named {manifest.name!r}, not {name!r}")
    return entry, manifest


# -- what the CLI imports ---------------------------------------------------------------------------

#: The commands a user runs before using any plugin: they load plugins' hook modules (that is how
#: plugins are found) but must import nothing those plugins register, and no vendor SDK.
LISTINGS: tuple[tuple[str, ...], ...] = (("--help",), ("plugins", "list", "--json"), ("providers", "list", "--json"))

#: Runs ``python -m openenv <args>`` in-process and writes ``sys.modules`` to argv[1] at exit
#: (``-X importtime`` misses modules loaded through ``importlib.import_module``, as entry points are).
_DUMP_MODULES = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["openenv", *sys.argv[2:]]
runpy.run_module("openenv", run_name="__main__", alter_sys=True)
"""


def cli_imports(*args: str, timeout: float = 120.0) -> set[str]:
    """The modules ``python -m openenv ARGS`` had imported when it exited, run in a fresh interpreter
    without the CLI's help cache (so ``--help`` builds the whole app and loads every plugin). Raises
    ``ContractError`` when the command fails."""
    with tempfile.TemporaryDirectory(prefix="openenv-cli-imports-") as tmp:
        out = Path(tmp) / "modules.json"
        done = subprocess.run([sys.executable, "-c", _DUMP_MODULES, str(out), *args], capture_output=True,
                              text=True, timeout=timeout, check=False,
                              env={**os.environ, "OPENENV_NO_CLI_CACHE": "1"})
        if done.returncode != 0 or not out.exists():
            raise ContractError(f"`openenv {' '.join(args)}` exited with code {done.returncode}:\n{done.stderr}")
        return set(json.loads(out.read_text(encoding="utf-8")))


def check_cli_imports(args: Iterable[str], *, loaded: str, forbidden: Iterable[str]) -> set[str]:
    """Run ``openenv ARGS`` (see ``cli_imports``) and check that module ``loaded`` was imported (a
    plugin's hook module: proof the plugin was found, so the check bites) and that no module matches
    a ``forbidden`` pattern (``fnmatch`` on the full module name: ``"modal"``, ``"modal.*"``,
    ``"azure*"``, ``"openenv_provider_x.provider"``). Returns the imported modules."""
    args = tuple(args)
    modules = cli_imports(*args)
    expect(loaded in modules, f"`openenv {' '.join(args)}` did not import {loaded!r}: is the plugin installed?")
    patterns = list(forbidden)
    bad = sorted(m for m in modules if any(fnmatch.fnmatchcase(m, p) for p in patterns))
    expect(not bad, f"`openenv {' '.join(args)}` imported what it must not: {', '.join(bad)}; register by "
                    "\"module:Class\" text and import the SDK inside the provider's methods")
    return modules
