"""An env's manifest says the step limit the env really has: ``envs show`` (and ``run``/``collect``,
which read it) must not say 200 where the env truncates at 50. Every installed env whose class (or
factory) takes a ``max_steps`` argument with a default declares that default as
``max_episode_steps``."""

from __future__ import annotations

import inspect

import pytest

from openenv.cli.envs_cmd import env_row
from openenv.plugins import get_plugin_manager
from openenv.registry import load_ref

PM = get_plugin_manager()


def _limited() -> list[str]:
    names = []
    for entry in PM.catalog.envs:
        try:
            obj = load_ref(entry.ref_text)
        except Exception:  # an env with a missing optional dependency is checked where it is installed
            continue
        param = inspect.signature(obj).parameters.get("max_steps")
        if param is not None and isinstance(param.default, int):
            names.append(entry.name)
    return sorted(names)


def test_the_scan_sees_the_envs_with_a_step_limit() -> None:
    assert "grid_world" in _limited()


@pytest.mark.parametrize("name", _limited())
def test_max_episode_steps_is_the_env_s_own_limit(name: str) -> None:
    entry = PM.catalog.envs.get(name)
    default = inspect.signature(load_ref(entry.ref_text)).parameters["max_steps"].default
    row = env_row(entry, PM)
    assert row["manifest"] is not None, row["manifest_error"]
    assert row["manifest"]["max_episode_steps"] == default, (
        f"{name}: the env truncates at max_steps={default}; set `max_episode_steps: {default}` in its openenv.yaml")
