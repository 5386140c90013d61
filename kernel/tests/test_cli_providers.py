"""``openenv providers list | ps | gc``."""

from __future__ import annotations

import json
import sys

import pytest

from openenv import hookimpl
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.testing import make_entry_point, make_plugin_module

PROVIDER_SOURCE = """
from openenv.interfaces import HandleInfo, Provider

CALLS = []

class FakeProvider(Provider):
    name = "{name}"

    def start(self, spec):
        raise NotImplementedError

    def ps(self, *, all_owners=False):
        CALLS.append(("ps", all_owners))
        mine = [HandleInfo("{name}", "{name}-1", "me:1:1", "http://127.0.0.1:9001", "running", "echo")]
        theirs = [HandleInfo("{name}", "{name}-2", "other:2:2", None, "exited", "grid_world")]
        return mine + theirs if all_owners else mine

    def gc(self):
        CALLS.append(("gc",))
        return [HandleInfo("{name}", "{name}-dead", "gone:3:3", None, "removed", "echo")]
"""

BROKEN_SOURCE = """
from openenv.interfaces import Provider

class Broken(Provider):
    def start(self, spec):
        raise NotImplementedError
    def ps(self, *, all_owners=False):
        raise ConnectionError("engine unreachable at unix:///nowhere.sock")
    def gc(self):
        raise ConnectionError("engine unreachable at unix:///nowhere.sock")
"""

ABSENT_SOURCE = """
from openenv.interfaces import EngineUnavailable, Provider

class Absent(Provider):
    def start(self, spec):
        raise EngineUnavailable("no engine")
    def ps(self, *, all_owners=False):
        raise EngineUnavailable("No engine answers at unix:///nowhere.sock.\\nStart one.")
    def gc(self):
        raise EngineUnavailable("No engine answers at unix:///nowhere.sock.\\nStart one.")
"""


@pytest.fixture
def providers(tmp_module):  # type: ignore[no-untyped-def]
    """A manager with providers 'alpha' (works), 'broken' (raises) and 'cloud' (import fails)."""
    alpha = tmp_module("provcli_alpha.provider", PROVIDER_SOURCE.format(name="alpha"))
    broken = tmp_module("provcli_broken.provider", BROKEN_SOURCE)
    cloud = tmp_module("provcli_cloud.provider", "raise ImportError('cloud SDK missing')\n")

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        registry.register("alpha", f"{alpha}:FakeProvider", description="The alpha provider.")
        registry.register("broken", f"{broken}:Broken")
        registry.register("cloud", f"{cloud}:CloudProvider")

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("provs", make_plugin_module(openenv_register_providers))])
    return pm, {"alpha": alpha, "broken": broken, "cloud": cloud}


def test_list_does_not_import_providers(run_cli, providers) -> None:
    pm, mods = providers
    result = run_cli(pm, "providers", "list", "--json")
    assert result.exit_code == 0, result.output
    assert not any(m in sys.modules for m in mods.values())
    doc = json.loads(result.stdout)
    assert doc["schema"] == "openenv.providers/1"
    assert doc["providers"] == [
        {"name": "alpha", "plugin": "provs", "ref": f"{mods['alpha']}:FakeProvider",
         "description": "The alpha provider.", "extra": {}},
        {"name": "broken", "plugin": "provs", "ref": f"{mods['broken']}:Broken",
         "description": "", "extra": {}},
        {"name": "cloud", "plugin": "provs", "ref": f"{mods['cloud']}:CloudProvider",
         "description": "", "extra": {}},
    ]
    table = run_cli(pm, "providers", "list")
    assert table.exit_code == 0
    assert "The alpha provider." in table.stdout and f"{mods['cloud']}:CloudProvider" in table.stdout
    assert not any(m in sys.modules for m in mods.values())


def test_ps_one_provider(run_cli, providers) -> None:
    pm, mods = providers
    result = run_cli(pm, "providers", "ps", "--provider", "alpha", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == {"schema": "openenv.provider-handles/1", "errors": [], "unavailable": [], "handles": [
        {"provider": "alpha", "id": "alpha-1", "owner": "me:1:1",
         "base_url": "http://127.0.0.1:9001", "status": "running", "env": "echo"}]}
    assert sys.modules[mods["alpha"]].CALLS == [("ps", False)]
    assert mods["cloud"] not in sys.modules  # only the named provider is loaded


def test_ps_all_owners_table(run_cli, providers) -> None:
    pm, mods = providers
    result = run_cli(pm, "providers", "ps", "-p", "alpha", "--all-owners")
    assert result.exit_code == 0, result.output
    assert "alpha-1" in result.stdout and "alpha-2" in result.stdout
    assert "http://127.0.0.1:9001" in result.stdout and "grid_world" in result.stdout
    assert sys.modules[mods["alpha"]].CALLS == [("ps", True)]


def test_ps_every_provider_reports_failures_and_keeps_the_rest(run_cli, providers) -> None:
    pm, _ = providers
    result = run_cli(pm, "providers", "ps", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [h["id"] for h in doc["handles"]] == ["alpha-1"]
    errors = {e["provider"]: e["error"] for e in doc["errors"]}
    assert set(errors) == {"broken", "cloud"}
    assert errors["broken"] == ("ps failed: ConnectionError: engine unreachable at "
                                "unix:///nowhere.sock")
    assert "cloud SDK missing" in errors["cloud"]
    assert "error: provider 'broken': ps failed" in result.output


def test_gc_prints_what_was_removed(run_cli, providers) -> None:
    pm, mods = providers
    result = run_cli(pm, "providers", "gc", "--provider", "alpha")
    assert result.exit_code == 0, result.output
    assert "Removed" in result.stdout and "alpha-dead" in result.stdout
    assert sys.modules[mods["alpha"]].CALLS == [("gc",)]
    doc = json.loads(run_cli(pm, "providers", "gc", "-p", "alpha", "--json").stdout)
    assert [h["id"] for h in doc["handles"]] == ["alpha-dead"]


def test_gc_failure_exits_one(run_cli, providers) -> None:
    pm, _ = providers
    result = run_cli(pm, "providers", "gc", "--provider", "broken")
    assert result.exit_code == 1
    assert "Nothing to remove." in result.stdout
    assert "error: provider 'broken': gc failed: ConnectionError" in result.output


@pytest.mark.parametrize("command", ["ps", "gc"])
def test_unknown_provider_suggests_and_exits_two(run_cli, providers, command: str) -> None:
    pm, mods = providers
    result = run_cli(pm, "providers", command, "--provider", "alpah")
    assert result.exit_code == 2
    assert ("error: Unknown provider 'alpah'. Did you mean 'alpha'? Installed providers: alpha, "
            "broken, cloud.") in result.output
    assert not any(m in sys.modules for m in mods.values())


def test_no_providers(run_cli) -> None:
    pm = PluginManager(strict=True, entry_points=[])
    assert "No providers registered" in run_cli(pm, "providers", "list").stdout
    result = run_cli(pm, "providers", "ps")
    assert result.exit_code == 0 and "No servers running." in result.stdout
    result = run_cli(pm, "providers", "gc", "-p", "local")
    assert result.exit_code == 2 and "none installed" in result.output


@pytest.fixture
def absent(tmp_module):  # type: ignore[no-untyped-def]
    """A manager with 'alpha' (works) and 'absent' (its engine is not there)."""
    alpha = tmp_module("provcli_alpha2.provider", PROVIDER_SOURCE.format(name="alpha"))
    gone = tmp_module("provcli_absent.provider", ABSENT_SOURCE)

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        registry.register("alpha", f"{alpha}:FakeProvider")
        registry.register("absent", f"{gone}:Absent")

    return PluginManager(strict=True, entry_points=[
        make_entry_point("provs", make_plugin_module(openenv_register_providers))])


@pytest.mark.parametrize("command", ["ps", "gc"])
def test_an_absent_engine_is_one_line_and_exit_zero(run_cli, absent, command: str) -> None:
    result = run_cli(absent, "providers", command)
    assert result.exit_code == 0, result.output
    assert "alpha-" in result.stdout  # the other provider still reports
    notes = [line for line in result.stderr.splitlines() if "absent" in line]
    assert notes == ["note: provider 'absent' skipped, its engine is not available: No engine "
                     "answers at unix:///nowhere.sock. Start one."]
    assert "Traceback" not in result.output
    doc = json.loads(run_cli(absent, "providers", command, "--json").stdout)
    assert doc["errors"] == []
    assert doc["unavailable"] == [{"provider": "absent", "reason": "No engine answers at "
                                   "unix:///nowhere.sock. Start one.", "kind": "engine"}]


def test_a_registered_non_provider_is_an_error_naming_the_fix(run_cli, tmp_module) -> None:
    mod = tmp_module("provcli_notprov.provider", "class Helper:\n    pass\n")

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        registry.register("helper", f"{mod}:Helper")

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("provs", make_plugin_module(openenv_register_providers))])
    result = run_cli(pm, "providers", "ps")
    assert result.exit_code == 1
    assert "expected an openenv.interfaces.Provider subclass" in result.output
    assert "Subclass openenv.interfaces.Provider" in result.output
