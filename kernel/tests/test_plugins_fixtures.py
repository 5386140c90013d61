"""The opt-in pytest plugin ``openenv.testing.fixtures``, used as a plugin author would use it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openenv.plugins import PluginManager
from openenv.testing import FakeDistribution, FakeEntryPoint, make_entry_point, make_plugin_module

AUTHOR_CONFTEST = 'pytest_plugins = ["openenv.testing.fixtures"]\n'

AUTHOR_TESTS = '''
import json

import pytest
from typer.testing import CliRunner

from openenv import hookimpl
from openenv.cli.main import build_app
from openenv.errors import PluginError


@hookimpl
def openenv_register_envs(registry):
    registry.register("mine", "my_pkg.env:MyEnv", description="my env")


def test_plugin_manager_is_strict_and_has_only_builtins(plugin_manager):
    assert plugin_manager.strict is True
    assert [i.name for i in plugin_manager.plugins(include_builtins=True)] == ["openenv"]


def test_register_my_plugin(plugin_manager, plugin_module):
    plugin_manager.register(plugin_module(openenv_register_envs), name="mine")
    assert plugin_manager.catalog.envs.get("mine").plugin == "mine"


def test_fake_entry_point_discovery(fake_entry_point, plugin_module, plugin_manager):
    ep = fake_entry_point("mine", plugin_module(openenv_register_envs), dist="my-dist", version="2.0")
    info = plugin_manager.load_entry_point(ep)
    assert (info.dist, info.version, info.status) == ("my-dist", "2.0", "ok")


def test_broken_entry_point_raises_in_strict_mode(fake_entry_point, plugin_manager):
    with pytest.raises(PluginError, match="import failed"):
        plugin_manager.load_entry_point(fake_entry_point("bad", error=ImportError("x")))


def test_cli_sees_my_plugin(use_plugin_manager, plugin_manager, plugin_module):
    plugin_manager.register(plugin_module(openenv_register_envs), name="mine")
    use_plugin_manager(plugin_manager)
    result = CliRunner().invoke(build_app([]), ["envs", "list", "--json"])
    assert result.exit_code == 0, result.output
    assert [e["name"] for e in json.loads(result.stdout)["envs"]] == ["mine"]
'''


@pytest.mark.slow
def test_fixtures_work_as_an_opt_in_plugin(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # keep the workspace's config out
    (tmp_path / "conftest.py").write_text(AUTHOR_CONFTEST)
    (tmp_path / "test_author.py").write_text(textwrap.dedent(AUTHOR_TESTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENENV_", "PYTEST_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "5 passed" in proc.stdout


# -- the fakes on their own -------------------------------------------------------------------------


def test_fake_entry_point_looks_like_an_installed_one() -> None:
    module = make_plugin_module(name="somewhere.plugin", VERSION="1")
    ep = make_entry_point("thing", module, dist="openenv-thing", version="0.9")
    assert (ep.name, ep.value, ep.group) == ("thing", "somewhere.plugin", "openenv")
    assert ep.dist == FakeDistribution("openenv-thing", "0.9")
    assert ep.load() is module and module.VERSION == "1"
    assert ep.loads == 1
    assert make_entry_point("x", object()).dist == FakeDistribution("fake-x", "0.0.0")
    assert make_entry_point("y", object(), dist=None).dist is None


def test_fake_entry_point_imports_string_targets_and_raises_errors() -> None:
    ep = FakeEntryPoint("b", "openenv.builtins")
    import openenv.builtins

    assert ep.load() is openenv.builtins and ep.value == "openenv.builtins"
    assert FakeEntryPoint("c", "openenv.errors:did_you_mean").load().__name__ == "did_you_mean"
    broken = FakeEntryPoint("d", error=ImportError("no sdk"), value="d_pkg.plugin")
    with pytest.raises(ImportError, match="no sdk"):
        broken.load()
    assert broken.loads == 1
    with pytest.raises(ValueError, match="needs a target"):
        FakeEntryPoint("e")


def test_plugin_manager_without_dist_metadata() -> None:
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("nodist", make_plugin_module(), dist=None)])
    info = pm.infos["nodist"]
    assert (info.dist, info.version, info.status) == (None, None, "ok")


def test_make_catalogue_plugin_registers_like_a_real_plugin() -> None:
    import pytest

    from openenv.plugins import PluginManager
    from openenv.testing import make_entry_point
    from openenv.testing.fakes import make_catalogue_plugin

    plugin = make_catalogue_plugin(
        envs={"e": "pkg.env:E", "m": {"ref": "pkg.env:M", "manifest": "pkg:openenv.yaml"}},
        transports={"t": {"server": "pkg.server:T", "client": "pkg.client:C"}},
        providers={"p": "pkg.prov:P"})
    pm = PluginManager(strict=True, entry_points=[make_entry_point("cat", plugin)])
    assert pm.catalog.envs.names() == ["e", "m"]
    assert pm.catalog.envs.get("m").manifest == "pkg:openenv.yaml"
    assert pm.catalog.transports.get("t").client == "pkg.client:C"
    assert pm.catalog.providers.get("p").plugin == "cat"
    with pytest.raises(TypeError, match="unknown kind"):
        make_catalogue_plugin(env={"e": "pkg:E"})
