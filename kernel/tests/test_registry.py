"""Registries: lazy references, duplicate refusal, lookups with suggestions."""

from __future__ import annotations

import sys

import pytest

from openenv import hookimpl
from openenv.errors import PluginError, UnknownNameError
from openenv.interfaces import Rubric
from openenv.plugins import PluginManager
from openenv.registry import (
    KINDS,
    Catalog,
    EnvRegistry,
    NameConflictError,
    Registry,
    TransportRegistry,
    load_ref,
)
from openenv.testing import make_entry_point, make_plugin_module


def test_registering_a_reference_does_not_import_it_until_load(tmp_module) -> None:
    mod = tmp_module("lazyreg_heavy.deep", """
        LOADS = []
        def Obj():  # a zero-argument env factory
            return None
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
    mod = tmp_module("lazyreg_attr", "def Present(): pass\n")
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
    class Local(Rubric):
        def evaluate(self, action: object, observation: object) -> float:
            return 0.0

    registry = Registry("rubric")
    entry = registry.register("local", Local)
    assert entry.load() is Local
    assert entry.ref_text == f"{__name__}:test_non_string_references_are_used_as_is.<locals>.Local"


def test_a_name_from_two_plugins_is_a_conflict_naming_both() -> None:
    registry = Registry("transport")
    registry.current_plugin, registry.current_dist = "ws-one", "ws-one-dist 1.0"
    registry.register("ws", "a:A")
    registry.current_plugin, registry.current_dist = "ws-two", None
    registry.register("ws", "b:B")
    with pytest.raises(NameConflictError) as excinfo:
        registry.get("ws")
    assert str(excinfo.value) == (
        "transport 'ws' is registered by 2 plugins: plugin 'ws-one' (ws-one-dist 1.0) and plugin "
        "'ws-two'. OpenEnv never picks one silently: disable the one you do not want "
        "(OPENENV_DISABLE_PLUGINS=ws-one or OPENENV_DISABLE_PLUGINS=ws-two) or uninstall it."
    )
    assert "ws" not in registry and registry.names() == []
    assert [e.plugin for e in registry.conflicts()["ws"]] == ["ws-one", "ws-two"]
    registry.drop_plugin("ws-two")
    assert registry.get("ws").ref == "a:A"
    assert registry.conflicts() == {}


def test_the_same_plugin_registering_a_name_twice_is_refused() -> None:
    registry = Registry("provider")
    registry.current_plugin = "p"
    registry.register("x", "a:A")
    with pytest.raises(PluginError, match="registered twice by plugin 'p'"):
        registry.register("x", "b:B")


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


def test_env_keywords_are_typed_and_shown_in_json() -> None:
    registry = EnvRegistry()
    registry.current_plugin = "real"
    entry = registry.register("e", "m:E", manifest="pkg:openenv.yaml", version="2.0", tags=["a"])
    assert (entry.manifest, entry.version, entry.tags) == ("pkg:openenv.yaml", "2.0", ("a",))
    row = entry.to_json()
    assert row == {"name": "e", "ref": "m:E", "plugin": "real", "manifest": "pkg:openenv.yaml",
                   "version": "2.0", "tags": ["a"]}


@pytest.mark.parametrize(("registry", "keyword", "expected"), [
    (EnvRegistry(), "plugin", "Env registrations accept: name, ref, description, manifest, version, tags."),
    (EnvRegistry(), "manfest", "Did you mean 'manifest'?"),
    (Registry("provider"), "region", "Provider registrations accept: name, ref, description."),
    (TransportRegistry(), "schemes", "declared once, as the client connector's `schemes` ClassVar"),
])
def test_unknown_keywords_are_refused_with_what_is_accepted(
    registry: Registry, keyword: str, expected: str
) -> None:
    registry.current_plugin = "careless"
    with pytest.raises(PluginError) as excinfo:
        registry.register("thing", "m:Obj", **{keyword: "x"})
    message = str(excinfo.value)
    assert message.startswith(f"{registry.kind} 'thing' (plugin 'careless'): register() got the "
                              f"unknown keyword '{keyword}'.")
    assert expected in message
    assert "thing" not in registry


def test_a_transport_needs_its_server_side() -> None:
    with pytest.raises(PluginError, match=r'needs server="pkg.server:MyTransport"'):
        TransportRegistry().register("t", client="pkg:C")


def test_catalog_has_one_registry_per_kind_in_order() -> None:
    catalog = Catalog()
    assert [r.kind for r in catalog.all()] == list(KINDS)
    assert catalog.registry("provider") is catalog.providers
    assert len(catalog.envs) == 0 and list(catalog.envs) == []
