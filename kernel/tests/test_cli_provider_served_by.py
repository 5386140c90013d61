"""``openenv run`` says which plugin provides the provider, and refuses a contested provider name.

A provider name registered by two plugins is served by neither (``openenv.registry``), as for envs:
``choose_provider`` names both plugins and the way out instead of calling the name unknown.
"""

from __future__ import annotations

import pytest

from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle
from openenv.plugins import PluginManager
from openenv.registry import NameConflictError
from openenv.testing import make_entry_point
from openenv.testing.fakes import make_catalogue_plugin

CONFLICT = ("provider 'local' is registered by 2 plugins: plugin 'local' (openenvkit-provider-local "
            "0.1.0) and plugin 'squatter' (squatter 6.6.6). OpenEnv never picks one silently: disable "
            "the one you do not want (OPENENV_DISABLE_PLUGINS=local or OPENENV_DISABLE_PLUGINS=squatter) "
            "or uninstall it.")


class BrokenProvider(Provider):
    """Starts nothing: enough for ``run`` to get past choosing it."""

    name = "broken"

    def start(self, spec: LaunchSpec) -> ProviderHandle:
        raise RuntimeError("no engine here")

    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        return []

    def gc(self) -> list[HandleInfo]:
        return []


def contested() -> PluginManager:
    return PluginManager(strict=False, entry_points=[
        make_entry_point("local", make_catalogue_plugin(providers={"local": BrokenProvider}),
                         dist="openenvkit-provider-local", version="0.1.0"),
        make_entry_point("squatter", make_catalogue_plugin(providers={"local": BrokenProvider}),
                         dist="squatter", version="6.6.6"),
        make_entry_point("modal", make_catalogue_plugin(providers={"modal": BrokenProvider}),
                         dist="openenvkit-provider-modal", version="0.1.0")])


@pytest.mark.parametrize("requested", [None, "local"])
def test_a_contested_provider_is_named_as_a_conflict(requested: str | None) -> None:
    with pytest.raises(NameConflictError) as err:
        contested().choose_provider("echo", requested)
    assert str(err.value) == CONFLICT
    assert contested().choose_provider("echo", "modal") == "modal"  # the rest keeps working


@pytest.mark.parametrize("args", [(), ("--provider", "local")])
def test_run_refuses_a_contested_provider_in_one_line(run_cli, args: tuple[str, ...]) -> None:
    result = run_cli(contested(), "run", "echo", *args)
    assert result.exit_code == 2, result.output
    assert "Unknown provider" not in result.output and "Did you mean" not in result.output
    assert [line for line in result.output.splitlines() if line.strip()] == [f"error: {CONFLICT}"]


def test_run_says_which_plugin_provides_the_provider(run_cli) -> None:
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("brokenprov", make_catalogue_plugin(providers={"broken": BrokenProvider}),
                         dist="brokenprov", version="1.2.3")])
    result = run_cli(pm, "run", "echo", "--provider", "broken")
    assert result.exit_code == 1, result.output
    assert (f"provider 'broken' is served by plugin 'brokenprov' (brokenprov 1.2.3): "
            f"{BrokenProvider.__module__}:BrokenProvider") in result.output
    assert "could not start env 'echo' with provider 'broken': no engine here" in result.output
