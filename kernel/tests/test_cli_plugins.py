"""``openenv plugins list``: table and JSON, broken plugins visible, strict mode readable."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from openenv import hookimpl
from openenv.cli.main import main
from openenv.cli.plugins_cmd import SCHEMA
from openenv.errors import PluginError
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.testing import FakeEntryPoint, make_entry_point, make_plugin_module


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register("alpha_env", "alpha_pkg.env:AlphaEnv", description="first env")


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register("alpha_cloud", "alpha_pkg.cloud:CloudProvider")


@hookimpl
def openenv_register_env(registry: Registry) -> None:  # misspelled on purpose
    registry.register("typo_env", "typo_pkg:Env")


def _raising_transports() -> object:
    @hookimpl
    def openenv_register_transports(registry: Registry) -> None:
        raise ValueError("bad transport table")

    return make_plugin_module(openenv_register_transports)


def broken_entry_points() -> list[FakeEntryPoint]:
    """One healthy plugin and the three kinds of breakage the listing must survive."""
    return [
        make_entry_point("alpha", make_plugin_module(openenv_register_envs, openenv_register_providers),
                         dist="openenv-alpha", version="1.0.0"),
        make_entry_point("importfail", error=ModuleNotFoundError("No module named 'gone_sdk'"),
                         value="importfail_pkg.plugin", dist="openenv-importfail", version="0.1"),
        make_entry_point("hookfail", _raising_transports(), dist="openenv-hookfail", version="0.2"),
        make_entry_point("typo", make_plugin_module(openenv_register_env), dist="openenv-typo",
                         version="0.3"),
    ]


def lenient() -> PluginManager:
    return PluginManager(strict=False, entry_points=broken_entry_points())


# -- table ------------------------------------------------------------------------------------------


def test_table_shows_every_plugin_and_broken_ones_with_their_error(run_cli) -> None:
    result = run_cli(lenient(), "plugins", "list")
    assert result.exit_code == 0, result.output
    out = result.stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "openenv-alpha" in lines["alpha"] and "1.0.0" in lines["alpha"] and " ok " in lines["alpha"]
    assert "env: alpha_env" in out and "provider: alpha_cloud" in out
    assert "error" in lines["importfail"]
    assert "import failed: ModuleNotFoundError: No module named 'gone_sdk'" in out
    assert "openenv_register_transports raised ValueError: bad transport table" in out
    assert "unknown hook 'openenv_register_env'. Did you mean 'openenv_register_envs'?" in out
    assert "1 ok, 3 error" in out
    assert "OPENENV_DISABLE_PLUGINS=<name>" in out
    assert "openenv (built-in)" not in out


def test_table_with_all_includes_the_builtin(run_cli) -> None:
    result = run_cli(lenient(), "plugins", "list", "--all")
    assert result.exit_code == 0
    assert "openenv (built-in)" in result.stdout
    assert "hooks: openenv_choose_provider" in result.stdout


def test_disabled_plugins_are_dimmed(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_DISABLE_PLUGINS", "importfail")
    result = run_cli(lenient(), "plugins", "list", env={"NO_COLOR": "", "FORCE_COLOR": "1"})
    assert result.exit_code == 0
    (row,) = [line for line in result.stdout.splitlines() if "importfail" in line]
    assert "\x1b[2m" in row  # ANSI "dim"
    assert "disabled" in row
    assert "gone_sdk" not in result.stdout  # a disabled plugin is never imported


def test_empty_listing_says_how_to_install(run_cli) -> None:
    result = run_cli(PluginManager(strict=True, entry_points=[]), "plugins", "list")
    assert result.exit_code == 0
    assert "No plugins installed" in result.stdout


# -- JSON -------------------------------------------------------------------------------------------

ROW_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "dist": (str, type(None)), "version": (str, type(None)),
    "module": (str, type(None)), "kinds": list, "provides": dict, "hooks": list, "status": str,
    "error": (str, type(None)), "builtin": bool,
}


def check_document(doc: object) -> list[dict[str, object]]:
    """Validate the documented schema key by key and type by type; return the rows."""
    assert isinstance(doc, dict)
    assert set(doc) == {"schema", "plugins"}
    assert doc["schema"] == SCHEMA == "openenv.plugins/1"
    rows = doc["plugins"]
    assert isinstance(rows, list)
    for row in rows:
        assert set(row) == set(ROW_TYPES), row
        for key, typ in ROW_TYPES.items():
            assert isinstance(row[key], typ), (key, row[key])
        assert row["status"] in {"ok", "error", "disabled"}
        assert (row["error"] is None) == (row["status"] != "error")
        assert all(isinstance(k, str) for k in row["kinds"])
        assert all(isinstance(h, str) for h in row["hooks"])
        assert row["kinds"] == sorted(row["provides"])
        for kind, names in row["provides"].items():
            assert kind in {"env", "transport", "provider", "rubric", "command"}
            assert isinstance(names, list) and names == sorted(names) and names
            assert all(isinstance(n, str) for n in names)
    return rows


def test_json_lists_broken_plugins_with_errors_and_exits_zero(run_cli) -> None:
    result = run_cli(lenient(), "plugins", "list", "--json")
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in check_document(json.loads(result.stdout))}
    assert list(rows) == ["alpha", "importfail", "hookfail", "typo"]
    assert rows["alpha"] == {
        "name": "alpha", "dist": "openenv-alpha", "version": "1.0.0",
        "module": rows["alpha"]["module"], "kinds": ["env", "provider"],
        "provides": {"env": ["alpha_env"], "provider": ["alpha_cloud"]},
        "hooks": ["openenv_register_envs", "openenv_register_providers"],
        "status": "ok", "error": None, "builtin": False,
    }
    assert rows["importfail"]["status"] == "error"
    assert rows["importfail"]["module"] == "importfail_pkg.plugin"
    assert rows["importfail"]["error"] == "import failed: ModuleNotFoundError: No module named 'gone_sdk'"
    assert rows["hookfail"]["error"] == "openenv_register_transports raised ValueError: bad transport table"
    assert rows["hookfail"]["provides"] == {}
    assert "Did you mean 'openenv_register_envs'?" in rows["typo"]["error"]
    assert rows["typo"]["hooks"] == []


def test_json_with_all_puts_the_builtin_first(run_cli) -> None:
    result = run_cli(lenient(), "plugins", "list", "--json", "--all")
    rows = check_document(json.loads(result.stdout))
    assert rows[0]["name"] == "openenv" and rows[0]["builtin"] is True
    assert rows[0]["hooks"] == ["openenv_choose_provider", "openenv_make_server",
                                "openenv_register_providers"]  # + upstream providers
    assert sum(r["builtin"] for r in rows) == 1


def test_json_marks_disabled_plugins(run_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_LOAD_PLUGINS", "alpha")
    rows = {r["name"]: r for r in check_document(json.loads(
        run_cli(lenient(), "plugins", "list", "--json").stdout))}
    assert {n: r["status"] for n, r in rows.items()} == {
        "alpha": "ok", "importfail": "disabled", "hookfail": "disabled", "typo": "disabled"}


# -- strict mode ------------------------------------------------------------------------------------


def test_strict_catalogue_failure_propagates_out_of_the_app(run_cli) -> None:
    # Building the app reads the catalogue (plugin commands): the error surfaces there, and
    # main() turns it into one line (tests below).
    eps = [make_entry_point("hookfail", _raising_transports())]
    with pytest.raises(PluginError, match="bad transport table"):
        run_cli(PluginManager(strict=True, entry_points=eps), "plugins", "list")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, use_plugin_manager):  # type: ignore[no-untyped-def]
    """Make ``importlib.metadata.entry_points`` report the given fake entry points."""

    def install(eps: list[FakeEntryPoint]) -> None:
        def entry_points(**params: object) -> list[FakeEntryPoint]:
            return eps if params.get("group") == "openenv" else []

        monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
        use_plugin_manager(None)  # the CLI builds the global manager from "installed" plugins

    return install


@pytest.mark.parametrize("which", ["importfail", "hookfail", "typo"])
def test_main_in_strict_mode_exits_non_zero_with_one_readable_message(
    which: str, installed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    installed([ep for ep in broken_entry_points() if ep.name in {"alpha", which}])
    monkeypatch.setenv("OPENENV_STRICT_PLUGINS", "1")
    with pytest.raises(SystemExit) as excinfo:
        main(["plugins", "list"])
    assert excinfo.value.code == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: Plugin '{which}' failed: ")
    assert "strict mode is on" in captured.err
    assert "Traceback" not in captured.err + captured.out


def test_main_without_strict_lists_and_exits_zero(
    installed, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    installed(broken_entry_points())
    monkeypatch.setenv("OPENENV_STRICT_PLUGINS", "0")
    with pytest.raises(SystemExit) as excinfo:
        main(["plugins", "list", "--json"])
    assert excinfo.value.code == 0
    rows = check_document(json.loads(capsys.readouterr().out))
    assert [r["status"] for r in rows] == ["ok", "error", "error", "error"]
