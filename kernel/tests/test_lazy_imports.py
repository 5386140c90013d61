"""Guard: the CLI's start-up and listings import no plugin internals and no server/network stack.

Each command runs in a fresh interpreter exactly as ``python -m openenv ...`` does (``runpy``), and
the test reads ``sys.modules`` when that interpreter exits. (``-X importtime`` is not enough: it
does not report modules imported through ``importlib.import_module``, which is how entry points
and lazy references are loaded.) Plugin *hook modules* (the entry points' targets and
their parent packages) are allowed: loading them is how plugins are discovered. Anything else
inside ``openenv_transport_*``, ``openenv_provider_*`` or ``openenv_env_*`` — an env, a server, a
provider — and the heavy libraries below must stay unimported. With only the kernel installed the
allowed set is empty; in the dev venv it covers every installed plugin, so this also guards them.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN_LIBRARIES = frozenset({"uvicorn", "starlette", "websockets", "httpx", "docker"})
PLUGIN_PREFIXES = ("openenv_transport_", "openenv_provider_", "openenv_env_")

COMMANDS = [
    ["--help"],
    ["plugins", "list", "--json"],
    ["plugins", "list", "--all"],
    ["envs", "list", "--json"],
    ["providers", "list", "--json"],
]


def allowed_hook_modules() -> set[str]:
    """Entry-point target modules of group ``openenv`` and their parent packages."""
    allowed: set[str] = set()
    for ep in importlib.metadata.entry_points(group="openenv"):
        parts = ep.value.partition(":")[0].strip().split(".")
        allowed.update(".".join(parts[: i + 1]) for i in range(len(parts)))
    return allowed


#: Runs ``python -m openenv <args>`` in-process and writes ``sys.modules`` to argv[1] at exit.
RUN_AND_DUMP = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["openenv", *sys.argv[2:]]
runpy.run_module("openenv", run_name="__main__", alter_sys=True)
"""


def imported_by(
    args: list[str], cwd: Path, python: str = sys.executable, env: dict[str, str] | None = None
) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    """Modules loaded by ``python -m openenv *args`` (and the finished process)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k not in {
            "OPENENV_STRICT_PLUGINS", "OPENENV_DISABLE_PLUGINS", "OPENENV_LOAD_PLUGINS"}}
        # A private, empty help cache: `--help` then builds the whole app, the case checked here
        # (the cached `--help`, which imports even less, is checked in tests/test_cli_first_contact.py).
        env["OPENENV_CACHE_DIR"] = str(cwd / "cli-cache")
    out = cwd / "modules.json"
    proc = subprocess.run(
        [python, "-c", RUN_AND_DUMP, str(out), *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, env=env, check=False,
    )
    modules = json.loads(out.read_text()) if out.exists() else []
    return modules, proc


def offenders(modules: list[str], allowed: set[str]) -> list[str]:
    bad = []
    for name in modules:
        top = name.split(".")[0]
        plugin_internal = top.startswith(PLUGIN_PREFIXES) and name not in allowed
        if top in FORBIDDEN_LIBRARIES or plugin_internal:
            bad.append(name)
    return bad


def test_offenders_detects_what_it_should() -> None:
    # the checker itself must be able to fail
    allowed = {"openenv_env_echo", "openenv_env_echo.plugin"}
    modules = ["openenv.plugins", "openenv_env_echo", "openenv_env_echo.plugin",
               "openenv_env_echo.env", "starlette.routing", "httpx", "openenv_provider_x",
               "dockerfile_parse"]
    assert offenders(modules, allowed) == ["openenv_env_echo.env", "starlette.routing", "httpx",
                                           "openenv_provider_x"]


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_cli_imports_no_plugin_internals_or_server_stack(args: list[str], tmp_path: Path) -> None:
    modules, proc = imported_by(args, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "openenv.cli.main" in modules and "openenv.cli.plugins_cmd" in modules
    bad = offenders(modules, allowed_hook_modules())
    assert not bad, (
        f"`openenv {' '.join(args)}` imported {bad}. Plugin packages must keep their __init__ and "
        "hook module free of env/server/provider imports (register 'module:Object' strings, "
        "import lazily), and the kernel CLI must import servers inside command functions."
    )
    if args[-1] == "--json":
        doc = json.loads(proc.stdout)
        assert doc["schema"].startswith("openenv.")
