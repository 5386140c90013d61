"""Registries: lazy references, duplicate refusal, lookups with suggestions."""

from __future__ import annotations

import sys

import pytest

from openenv import hookimpl
from openenv.errors import PluginError, UnknownNameError
from openenv.plugins import PluginManager
from openenv.registry import KINDS, Catalog, Registry, load_ref
from openenv.testing import make_entry_point, make_plugin_module


def test_registering_a_reference_does_not_import_it_until_load(tmp_module) -> None:
    mod = tmp_module("lazyreg_heavy.deep", """
        LOADS = []
        class Obj:
            pass
        LOADS.append("imported")
        """)
    registry = Registry("env")
    entry = registry.register("thing", f"{mod}:Obj", description="lazy")
    assert mod not in sys.modules and "lazyreg_heavy" not in sys.modules
    assert entry.to_json() == {"name": "thing", "ref": f"{mod}:Obj", "plugin": "<direct>",
                               "description": "lazy"}
    assert mod not in sys.modules

    obj = registry.load("thing")
    assert obj is sys.modules[mod].Obj
    assert registry.load("thing") is obj
    assert sys.modules[mod].LOADS == ["imported"]  # imported once


def test_listing_through_the_plugin_manager_stays_lazy(tmp_module) -> None:
    mod = tmp_module("lazyreg_env_mod", "raise RuntimeError('imported while listing')\n")

    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("lazy", f"{mod}:Env", manifest="/nonexistent/openenv.yaml")

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("lz", make_plugin_module(openenv_register_envs))])
    assert [i.to_json()["provides"] for i in pm.plugins()] == [{"env": ["lazy"]}]
    assert [e.to_json()["ref"] for e in pm.catalog.envs] == [f"{mod}:Env"]
    assert mod not in sys.modules
    with pytest.raises(PluginError) as excinfo:
        pm.catalog.envs.load("lazy")
    message = str(excinfo.value)
    assert "env 'lazy' (from plugin 'lz') could not be loaded" in message
    assert "RuntimeError: imported while listing" in message


def test_load_error_names_kind_plugin_and_reference() -> None:
    registry = Registry("provider")
    registry.current_plugin = "cloudy"
    registry.register("cloud", "definitely_not_installed_sdk.provider:Cloud")
    with pytest.raises(PluginError) as excinfo:
        registry.load("cloud")
    message = str(excinfo.value)
    assert message.startswith("provider 'cloud' (from plugin 'cloudy') could not be loaded from "
                              "definitely_not_installed_sdk.provider:Cloud: ModuleNotFoundError")
    assert "Reinstall the plugin" in message


def test_missing_attribute_is_a_load_error(tmp_module) -> None:
    mod = tmp_module("lazyreg_attr", "class Present: pass\n")
    registry = Registry("env")
    registry.register("absent", f"{mod}:Absent")
    with pytest.raises(PluginError, match="AttributeError"):
        registry.load("absent")
    registry.register("present", f"{mod}:Present")
    assert registry.load("present").__name__ == "Present"


@pytest.mark.parametrize("ref", ["no_colon", ":Obj", "mod:", ""])
def test_invalid_references_are_refused_on_load(ref: str) -> None:
    with pytest.raises(PluginError, match=r"expected 'package\.module:Object'"):
        load_ref(ref)


def test_non_string_references_are_used_as_is() -> None:
    class Local:
        pass

    registry = Registry("rubric")
    entry = registry.register("local", Local)
    assert entry.load() is Local
    assert entry.ref_text == f"{__name__}:test_non_string_references_are_used_as_is.<locals>.Local"


def test_duplicate_names_are_refused_naming_both_plugins() -> None:
    registry = Registry("transport")
    registry.current_plugin = "ws-one"
    registry.register("ws", "a:A")
    registry.current_plugin = "ws-two"
    with pytest.raises(PluginError) as excinfo:
        registry.register("ws", "b:B")
    assert str(excinfo.value) == (
        "Duplicate transport 'ws': registered by plugin 'ws-one' and again by plugin 'ws-two'. "
        "Uninstall one of them, or disable one with OPENENV_DISABLE_PLUGINS=ws-two."
    )
    assert registry.get("ws").ref == "a:A"


@pytest.mark.parametrize("name", ["", None, 3])
def test_names_must_be_non_empty_strings(name: object) -> None:
    with pytest.raises(PluginError, match="names must be non-empty strings"):
        Registry("env").register(name, "a:A")  # type: ignore[arg-type]


def test_unknown_name_suggests_the_closest() -> None:
    registry = Registry("env")
    for n in ("echo", "grid_world", "coding"):
        registry.register(n, f"pkg:{n}")
    with pytest.raises(UnknownNameError) as excinfo:
        registry.get("ecoh")
    assert str(excinfo.value) == (
        "Unknown env 'ecoh'. Did you mean 'echo'? Installed envs: coding, echo, grid_world."
    )
    assert isinstance(excinfo.value, LookupError)
    with pytest.raises(UnknownNameError, match="Installed providers: none installed"):
        Registry("provider").get("docker")


def test_extras_cannot_override_core_keys_in_json() -> None:
    registry = Registry("env")
    registry.current_plugin = "real"
    entry = registry.register("e", "m:E", plugin="spoofed", tags=["a"], handle=object())
    row = entry.to_json()
    assert row["plugin"] == "real"
    assert row["tags"] == ["a"]
    assert "handle" not in row  # not JSON-able: left out of listings


def test_catalog_has_one_registry_per_kind_in_order() -> None:
    catalog = Catalog()
    assert [r.kind for r in catalog.all()] == list(KINDS)
    assert catalog.registry("provider") is catalog.providers
    assert len(catalog.envs) == 0 and list(catalog.envs) == []
