"""``openenv envs list`` and the ``openenv.yaml`` manifest model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from openenv import hookimpl
from openenv.cli.envs_cmd import SCHEMA
from openenv.manifest import Manifest, ManifestError, load_manifest, locate_manifest, parse_manifest
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.testing import make_entry_point, make_plugin_module

UPSTREAM_TEMPLATE = """\
spec_version: 1
name: my_env
version: 0.1.0
type: space
runtime: fastapi
app: server.app:app
port: 8000
validation:
  reward:
    range: [0.0, 1.0]
"""

# -- the manifest model -----------------------------------------------------------------------------


def test_upstream_template_loads_and_keeps_unknown_sections(tmp_path: Path) -> None:
    path = tmp_path / "openenv.yaml"
    path.write_text(UPSTREAM_TEMPLATE)
    m = load_manifest(path)
    assert (m.spec_version, m.name, m.type, m.runtime, m.app, m.port) == (
        1, "my_env", "space", "fastapi", "server.app:app", 8000)
    assert m.version == "0.1.0" and m.description is None and m.tags == []
    assert m.model_dump()["validation"] == {"reward": {"range": [0.0, 1.0]}}


def test_sandbox_needs_are_declared_and_off_unless_asked_for() -> None:
    assert parse_manifest({"name": "x"}).sandbox is None
    needs = parse_manifest({"name": "x", "sandbox": {"drop_privileges": True}}).sandbox
    assert needs is not None and (needs.drop_privileges, needs.gvisor) == (True, "auto")


def test_defaults_need_only_a_name() -> None:
    m = parse_manifest({"name": "tiny", "description": "d", "tags": ["x"], "version": 1.5})
    assert m == Manifest(name="tiny", description="d", tags=["x"], version="1.5")
    assert (m.spec_version, m.type, m.runtime, m.app, m.port) == (1, "space", "fastapi", "server.app:app", 8000)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({}, "'name': Field required"),
        ({"name": ""}, "'name': String should have at least 1 character"),
        ({"name": "x", "port": 70000}, "'port': Input should be less than or equal to 65535"),
        ({"name": "x", "port": "http"}, "'port': Input should be a valid integer"),
        ({"name": "x", "app": "server.app"}, "'app': Value error, must be 'module.path:attribute'"),
        ({"name": "x", "tags": "a,b"}, "'tags': Input should be a valid list"),
        ({"name": "x", "sandbox": {"drop_privilege": True}}, "'sandbox.drop_privilege': Extra inputs are not"),
        ({"name": "x", "sandbox": {"gvisor": "yes"}}, "'sandbox.gvisor': Input should be 'auto', 'required' or 'off'"),
        ({"name": "x", "sandbox": True}, "'sandbox': Input should be a valid dictionary"),
    ],
)
def test_invalid_fields_are_named(data: dict[str, object], needle: str) -> None:
    with pytest.raises(ManifestError) as excinfo:
        parse_manifest(data, source="envs/x/openenv.yaml")
    message = str(excinfo.value)
    assert message.startswith("envs/x/openenv.yaml: invalid manifest: ")
    assert needle in message


def test_file_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"Manifest not found: .*missing\.yaml\. Create it"):
        load_manifest(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nport: [8000\n")
    with pytest.raises(ManifestError, match=r"bad\.yaml: not valid YAML at line 3, column 1"):
        load_manifest(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- name: x\n")
    with pytest.raises(ManifestError, match="must be a YAML mapping"):
        load_manifest(listing)


def test_locate_manifest_forms(tmp_path: Path) -> None:
    assert locate_manifest(str(tmp_path / "a.yaml")) == tmp_path / "a.yaml"
    assert locate_manifest("openenv.yaml", relative_to=tmp_path) == tmp_path / "openenv.yaml"
    # package form: found through the finder, the package is not imported
    import openenv

    kernel_pkg = Path(openenv.__file__).parent
    assert locate_manifest("openenv.cli:x.yaml") == kernel_pkg / "cli" / "x.yaml"
    with pytest.raises(ManifestError, match="package 'surely_not_installed_pkg' is not installed"):
        locate_manifest("surely_not_installed_pkg:openenv.yaml")


def test_locate_manifest_does_not_import_the_package(tmp_module) -> None:
    tmp_module("manifestpkg_noimport.sub", "raise RuntimeError('imported')\n")
    path = locate_manifest("manifestpkg_noimport:openenv.yaml")
    assert path.name == "openenv.yaml" and path.parent.name == "manifestpkg_noimport"
    assert "manifestpkg_noimport" not in sys.modules


# -- the command ------------------------------------------------------------------------------------


def env_manager(tmp_path: Path, tmp_module) -> tuple[PluginManager, str]:  # type: ignore[no-untyped-def]
    """Envs whose modules raise when imported: listing them must not import them."""
    env_mod = tmp_module("envlist_pkg_mod.env", "raise RuntimeError('env module imported')\n")
    good = tmp_path / "good.yaml"
    good.write_text("spec_version: 1\nname: with_manifest\nversion: '2.0'\ntype: space\n"
                    "runtime: fastapi\napp: server.app:app\nport: 8123\n"
                    "description: From the manifest.\ntags: [demo, fast]\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")

    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("with_manifest", f"{env_mod}:A", manifest=str(good), version="2.0")
        registry.register("described", f"{env_mod}:B", description="Registered description.",
                          manifest=str(good))
        registry.register("bad_manifest", f"{env_mod}:C", manifest=str(broken))
        registry.register("plain", f"{env_mod}:D")

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("envp", make_plugin_module(openenv_register_envs))])
    return pm, env_mod


def test_json_lists_envs_with_manifest_data_without_importing_them(
    run_cli, tmp_path: Path, tmp_module
) -> None:
    pm, env_mod = env_manager(tmp_path, tmp_module)
    result = run_cli(pm, "envs", "list", "--json")
    assert result.exit_code == 0, result.output
    assert env_mod not in sys.modules and "envlist_pkg_mod" not in sys.modules
    doc = json.loads(result.stdout)
    assert set(doc) == {"schema", "envs", "conflicts"} and doc["schema"] == SCHEMA == "openenv.envs/1"
    rows = {r["name"]: r for r in doc["envs"]}
    assert list(rows) == ["bad_manifest", "described", "plain", "with_manifest"]  # sorted
    keys = {"name", "plugin", "ref", "description", "manifest_path", "manifest", "manifest_error", "extra"}
    assert all(set(r) == keys for r in rows.values())

    wm = rows["with_manifest"]
    assert (wm["plugin"], wm["ref"]) == ("envp", f"{env_mod}:A")
    assert wm["description"] == "From the manifest."  # no registered description: manifest's
    assert wm["manifest_path"] == str(tmp_path / "good.yaml")
    upstream = {"spec_version": 1, "name": "with_manifest", "type": "space",
                "runtime": "fastapi", "app": "server.app:app", "port": 8123,
                "description": "From the manifest.", "version": "2.0",
                "tags": ["demo", "fast"]}
    assert {k: wm["manifest"][k] for k in upstream} == upstream
    # The fields `openenv validate` and `envs search` read, at their defaults (docs/manifest.md).
    assert {k: wm["manifest"][k] for k in ("reward_range", "oracle", "examples", "max_episode_steps", "rubric")} == {
        "reward_range": None, "oracle": None, "examples": [], "max_episode_steps": 200, "rubric": None}
    assert wm["manifest_error"] is None and wm["extra"] == {"version": "2.0"}

    assert rows["described"]["description"] == "Registered description."
    assert rows["bad_manifest"]["manifest"] is None
    assert "not valid YAML" in rows["bad_manifest"]["manifest_error"]
    assert rows["plain"]["manifest_path"] is None and rows["plain"]["manifest_error"] is None


def test_table_lists_envs_and_manifest_summary(run_cli, tmp_path: Path, tmp_module) -> None:
    pm, env_mod = env_manager(tmp_path, tmp_module)
    result = run_cli(pm, "envs", "list")
    assert result.exit_code == 0, result.output
    out = result.stdout
    line = next(x for x in out.splitlines() if x.startswith("with_manifest"))
    assert "envp" in line and f"{env_mod}:A" in line and "From the manifest." in line
    assert "v2.0 · space/fastapi · port 8123 · tags: demo, fast" in line
    assert "not valid YAML" in out
    assert env_mod not in sys.modules


def test_relative_manifest_is_next_to_the_plugin_module(run_cli, tmp_module) -> None:
    name = tmp_module("relmanifest_plug.plugin", """
        from openenv import hookimpl

        @hookimpl
        def openenv_register_envs(registry):
            registry.register("rel", "relmanifest_plug.env:Env", manifest="openenv.yaml")
        """)
    import importlib.util

    folder = Path(importlib.util.find_spec(name).origin).parent  # type: ignore[union-attr,arg-type]
    (folder / "openenv.yaml").write_text("name: rel\ndescription: next to plugin.py\n")
    pm = PluginManager(strict=True, entry_points=[make_entry_point("rel", name)])
    (row,) = json.loads(run_cli(pm, "envs", "list", "--json").stdout)["envs"]
    assert row["manifest_path"] == str(folder / "openenv.yaml")
    assert row["description"] == "next to plugin.py"


def test_no_envs_says_how_to_install(run_cli) -> None:
    result = run_cli(PluginManager(strict=True, entry_points=[]), "envs", "list")
    assert result.exit_code == 0 and "No environments registered" in result.stdout
    doc = json.loads(run_cli(PluginManager(strict=True, entry_points=[]), "envs", "list", "--json").stdout)
    assert doc == {"schema": "openenv.envs/1", "envs": [], "conflicts": []}
