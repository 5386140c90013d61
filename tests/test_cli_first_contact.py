"""First contact with the ``openenv`` command, in real subprocesses: ``--version``, a ``--help``
that loads no plugin (nor typer or ``rich``), and ``run --transport`` mistakes as one line.

Start-up time itself is measured in the benchmark; these tests check the structure that makes it
fast (what ``--help`` imports), which cannot drift silently.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import openenv

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def cli(openenv_cli: Cli, cache_dir: Path) -> Cli:
    """``openenv_cli`` with a private listing cache."""

    def run(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
        return openenv_cli(*args, env={"OPENENV_CACHE_DIR": str(cache_dir), **(env or {})}, **kw)

    return run


#: Runs ``openenv --help`` as ``python -m openenv`` does, then writes ``sys.modules`` to a file.
#: (``-X importtime`` would miss modules loaded by ``importlib.import_module``, as plugins are.)
_DRIVER = """
import json, runpy, sys
out = sys.argv[1]
sys.argv = ["openenv", "--help"]
try:
    runpy.run_module("openenv", run_name="__main__")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _help_imports(cli_env: dict[str, str], cache_dir: Path, **env: str
                  ) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    out = cache_dir.parent / "modules.json"
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(out)], capture_output=True, text=True,
                          timeout=120, env={**cli_env, "OPENENV_CACHE_DIR": str(cache_dir), **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["code"] in (0, None), doc
    return proc, set(doc["modules"])


def _plugin_packages() -> set[str]:
    """Top-level packages of the installed plugins (from their entry points, not imported)."""
    return {ep.value.split(":")[0].split(".")[0] for ep in md.entry_points(group="openenv")}


def test_version(cli: Cli) -> None:
    proc = cli("--version")
    assert proc.returncode == 0 and proc.stdout == f"openenv {openenv.__version__}\n" and proc.stderr == ""
    verbose = cli("--version", "-v")
    assert verbose.returncode == 0
    lines = verbose.stdout.splitlines()
    assert lines[0] == f"openenv {openenv.__version__}"
    dists = {ep.dist.name for ep in md.entry_points(group="openenv") if ep.dist is not None}
    if dists:
        assert lines[1] == "plugins:"
        listed = {line.split()[0] for line in lines[2:]}
        assert listed == dists
        for ep in md.entry_points(group="openenv"):  # each dist line names its plugins and version
            row = next(line for line in lines[2:] if line.split()[0] == ep.dist.name)  # type: ignore[union-attr]
            assert ep.dist.version in row.split() and ep.name in row  # type: ignore[union-attr]


def test_version_through_typer_and_in_help(cli: Cli) -> None:
    # `--version` also works where main()'s shortcut does not apply (embedding build_app)
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    result = CliRunner().invoke(build_app(["--version"]), ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"openenv {openenv.__version__}"
    assert "--version" in cli("--help").stdout


def test_help_imports_no_plugin_module_and_no_rich(cli_env: dict[str, str], cache_dir: Path) -> None:
    plugins = _plugin_packages()
    cold, imported = _help_imports(cli_env, cache_dir)  # first run: loads the plugins, fills the cache
    assert not {m for m in imported if m.split(".")[0] == "rich"}, "openenv --help imported rich"
    if plugins:
        assert {m for m in imported if m.split(".")[0] in plugins}  # the driver sees plugin imports
    assert (cache_dir / "openenv_cli.json").is_file()
    warm, imported = _help_imports(cli_env, cache_dir)
    assert not {m for m in imported if m.split(".")[0] in plugins}, "openenv --help imported plugin modules"
    assert not {m for m in imported if m.split(".")[0] == "rich"}, "openenv --help imported rich"
    for heavy in ("typer", "click", "openenv.plugins", "openenv.server", "openenv.client", "uvicorn",
                  "starlette", "pydantic"):
        assert heavy not in imported, heavy
    assert warm.stdout == cold.stdout  # the cached listing is the one the plugins gave
    for command in ("serve", "run", "plugins", "envs", "providers"):
        assert f"  {command} " in warm.stdout


def test_help_listing_cache_follows_the_installed_plugins(cli_env: dict[str, str], cache_dir: Path) -> None:
    plugins = _plugin_packages()
    if not plugins:
        pytest.skip("no plugins installed")
    _help_imports(cli_env, cache_dir)
    doc = json.loads((cache_dir / "openenv_cli.json").read_text())
    assert doc["schema"] == "openenv.cli-cache/1" and doc["help"]
    # A plugin-selection variable changes what the plugins contribute: the key no longer matches,
    # so the plugins are loaded again (and the cache rewritten under the new key).
    _, imported = _help_imports(cli_env, cache_dir, OPENENV_DISABLE_PLUGINS="none-such")
    assert {m for m in imported if m.split(".")[0] in plugins}
    assert json.loads((cache_dir / "openenv_cli.json").read_text())["key"] != doc["key"]


def test_run_with_an_unknown_transport_is_one_line_like_serve(cli: Cli, server_records: Any) -> None:
    run = cli("run", "echo", "--transport", "grpc")
    serve = cli("serve", "echo", "--transport", "grpc", "--port", "0")
    assert run.returncode == 2 and serve.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.splitlines() == serve.stderr.splitlines()
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith("error: Unknown transport 'grpc'.") and "Installed transports:" in run.stderr
    assert server_records() == []  # refused before any server was started


def test_run_with_a_server_only_transport_names_those_with_a_client(cli: Cli, server_records: Any) -> None:
    listed = {ep.name for ep in md.entry_points(group="openenv")}
    if "mcp" not in listed:
        pytest.skip("openenv-transport-mcp is not installed")
    proc = cli("run", "echo", "--transport", "mcp")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert re.fullmatch(r"error: Transport 'mcp' has no client connector \(it only serves\)\. Transports "
                        r"with a client: .*ws.*\.\n", proc.stderr)
    assert server_records() == []


def test_help_without_the_cache_is_the_same_text(cli: Cli, cli_env: dict[str, str], cache_dir: Path) -> None:
    cached = cli("--help")
    assert cli("--help").stdout == cached.stdout  # the second one comes from the cache
    live = cli("--help", env={"OPENENV_NO_CLI_CACHE": "1"})
    assert live.returncode == 0 and live.stdout == cached.stdout
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    typer_help = CliRunner().invoke(build_app(["--help"]), ["--help"], env={"COLUMNS": "200"})
    for line in cached.stdout.splitlines()[:8]:  # the same head as typer's own --help
        assert line in typer_help.stdout


@pytest.mark.parametrize("args", [["-h"], ["run", "-h"], ["providers", "ps", "-h"], ["push", "-h"],
                                  ["rubrics", "rescore", "-h"]])
def test_dash_h_is_help_everywhere(cli: Cli, args: list[str]) -> None:
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: openenv") and done.stdout == cli(*args[:-1], "--help").stdout


def test_a_transport_named_by_its_protocol_gets_a_did_you_mean(cli: Cli, server_records: Any) -> None:
    done = cli("run", "echo", "--transport", "http")
    assert done.returncode == 2
    assert done.stderr.startswith("error: Unknown transport 'http'. Did you mean 'rest'?")
    assert "Did you mean 'ws'?" in cli("serve", "echo", "--transport", "websocket", "--port", "0").stderr
    assert server_records() == []


def test_providers_ps_is_one_quiet_line_about_clouds_not_set_up(cli: Cli) -> None:
    done = cli("providers", "ps", env={"MODAL_TOKEN_ID": "", "DAYTONA_API_KEY": "", "AZURE_SUBSCRIPTION_ID": ""})
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) <= 1, done.stderr
    if notes:
        assert "--provider NAME" in notes[0]
    asked = cli("providers", "ps", "--provider", "modal", env={"MODAL_TOKEN_ID": ""})
    if asked.returncode == 0 and "modal" in asked.stderr:  # the plugin is installed: its full reason
        assert "MODAL_TOKEN_ID" in asked.stderr


def test_unconfigured_cloud_providers_import_no_sdk() -> None:
    """What makes `providers ps` fast: a provider without credentials says so before importing its
    cloud SDK (daytona's alone took 1.5 s)."""
    code = ("import os, sys\n"
            "for k in ('MODAL_TOKEN_ID', 'MODAL_TOKEN_SECRET', 'DAYTONA_API_KEY', 'AZURE_SUBSCRIPTION_ID'):\n"
            "    os.environ.pop(k, None)\n"
            "from openenv.cli.providers_cmd import _run_each\n"
            "_run_each(None, lambda p: p.ps(all_owners=False), 'ps')\n"
            "print(','.join(sorted({m.split('.')[0] for m in sys.modules} & {'modal', 'daytona', 'azure'})))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
