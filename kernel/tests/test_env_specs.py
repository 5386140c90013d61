"""``NAME:ARG`` env specs (``harbor:./tasks``): a registered env whose class defines ``from_spec``
builds the env from ARG; ``validate_spec`` gives ``openenv validate`` its report; any other
``NAME:ARG`` stays a ``module:Class`` reference."""

from __future__ import annotations

from typing import Any

import pytest

from openenv import hookimpl
from openenv.cli.validate_cmd import Check, Report
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.server import resolve_env
from openenv.testing import make_entry_point, make_plugin_module
from openenv.testing.envs import EchoEnv


class SpecEnv(EchoEnv):
    made_from: str = ""

    @classmethod
    def from_spec(cls, arg: str) -> type[SpecEnv]:
        return type("SpecEnv", (cls,), {"made_from": arg})

    @classmethod
    def validate_spec(cls, arg: str) -> Report:
        return Report(target=arg, checks=[Check(arg, "fail", "checked by the env")])


def _pm(ref: Any) -> PluginManager:
    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("specced", ref)

    return PluginManager(strict=True, entry_points=[make_entry_point("sp", make_plugin_module(openenv_register_envs))])


def test_a_registered_env_with_from_spec_is_built_from_the_argument() -> None:
    factory, name = resolve_env("specced:some/suite", _pm(SpecEnv))
    assert issubclass(factory, SpecEnv) and factory.made_from == "some/suite"
    assert name == "specced"


def test_an_env_without_from_spec_leaves_name_arg_a_module_reference() -> None:
    with pytest.raises(Exception, match="specced"):  # 'specced' is no module: the import of the reference fails
        resolve_env("specced:Thing", _pm(EchoEnv))


def test_validate_takes_the_report_of_validate_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    import openenv.plugins
    from openenv.cli.validate_cmd import validate_target

    monkeypatch.setattr(openenv.plugins, "get_plugin_manager", lambda: _pm(SpecEnv))
    report = validate_target("specced:./tasks")
    assert [c.to_json() for c in report.checks] == [{"name": "./tasks", "status": "fail",
                                                     "detail": "checked by the env", "fix": ""}]
    assert not report.ok
