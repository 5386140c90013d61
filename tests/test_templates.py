"""The template packages under ``templates/`` work as written, so they cannot rot.

Each template is loaded without installing it: its ``src`` goes on ``sys.path``, the entry point
its ``pyproject.toml`` declares is loaded into a fresh plugin manager (so the declaration and the
plugin module are checked together), and then the template's own tests run, which run the kit's
contract on it (``EnvContract``, ``TransportContract``, ``ProviderContract``).
"""

from __future__ import annotations

import importlib.util
import inspect
import tomllib
from pathlib import Path
from typing import Any

import pytest

import openenv_transport_ws.plugin
from openenv.env import Environment
from openenv.interfaces import Provider, ServerTransport
from openenv.plugins import PluginManager
from openenv.testing import EnvContract, TransportContract, make_entry_point

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
#: template folder -> (registry kind, registered name, the base class of what it registers)
CASES: dict[str, tuple[str, str, type]] = {
    "env": ("envs", "counter", Environment),
    "transport": ("transports", "lines", ServerTransport),
    "provider": ("providers", "spawn", Provider),
}


def _load_template(folder: str, monkeypatch: pytest.MonkeyPatch) -> PluginManager:
    """A fresh manager holding the template's plugin, loaded through its declared entry point."""
    root = TEMPLATES / folder
    monkeypatch.syspath_prepend(str(root / "src"))
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["openenv"]
    assert len(points) == 1, f"templates/{folder} should declare one openenv entry point: {points}"
    (name, target), = points.items()
    pm = PluginManager(strict=True, entry_points=[])
    info = pm.load_entry_point(make_entry_point(name, target, dist=project["name"]))
    assert info.status == "ok", f"templates/{folder}: the plugin did not load: {info.error}"
    return pm


def _run_template_tests(folder: str) -> list[str]:
    """Import the template's test modules and call each ``test_*`` function (none takes fixtures)."""
    ran: list[str] = []
    for path in sorted((TEMPLATES / folder / "tests").glob("test_*.py")):
        spec = importlib.util.spec_from_file_location(f"template_{folder}_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for fname, fn in inspect.getmembers(module, inspect.isfunction):
            if fname.startswith("test_") and fn.__module__ == module.__name__:
                assert not inspect.signature(fn).parameters, f"{path.name}:{fname} must not need fixtures"
                fn()
                ran.append(fname)
    return ran


@pytest.mark.parametrize("folder", sorted(CASES))
def test_template_registers_what_its_pyproject_declares(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kind, name, base = CASES[folder]
    pm = _load_template(folder, monkeypatch)
    registry = getattr(pm.catalog, kind)
    assert registry.names() == [name]
    loaded: Any = registry.load(name)
    assert isinstance(loaded, type) and issubclass(loaded, base)


@pytest.mark.parametrize("folder", sorted(CASES))
def test_template_passes_its_own_tests(folder: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(TEMPLATES / folder / "src"))
    ran = _run_template_tests(folder)
    assert any("contract" in name for name in ran), f"templates/{folder}/tests runs no contract: {ran}"


def test_env_template_keeps_the_contract_when_loaded_as_a_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    pm = _load_template("env", monkeypatch)
    pm.register(openenv_transport_ws.plugin, name="ws")  # so the served check runs too
    contract = EnvContract(pm.catalog.envs.load("counter"), name="counter", plugin_manager=pm)
    assert "check_served" in contract.run()


def test_transport_template_keeps_the_contract_when_loaded_as_a_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    pm = _load_template("transport", monkeypatch)
    assert TransportContract("lines", plugin_manager=pm).run()[-1] == "check_capacity"
