"""Shared fixtures for the kernel tests.

The kernel's opt-in pytest plugin is imported here (rather than named in ``pytest_plugins``, which
pytest only honours in a root conftest) so these tests use exactly what plugin authors get.
Every test starts with no ``OPENENV_*`` plugin switches set and leaves the process-wide plugin
manager as it found it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv.testing.fixtures import (  # noqa: F401 - fixtures are used by name
    fake_entry_point,
    plugin_manager,
    plugin_module,
    use_plugin_manager,
)


@pytest.fixture(autouse=True)
def _isolated_plugin_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import openenv.plugins as plugins_module

    for var in ("OPENENV_DISABLE_PLUGINS", "OPENENV_LOAD_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    previous = plugins_module._GLOBAL
    yield
    plugins_module.reset_plugin_manager(previous)


@pytest.fixture
def tmp_module(tmp_path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Factory writing an importable module ``name`` (dotted names make packages) with ``source``.

    The folder is put on ``sys.path`` for this test only, and the modules are forgotten after it,
    so each test sees a fresh import.
    """
    import importlib
    import sys
    import textwrap
    import uuid

    root = tmp_path / f"mods_{uuid.uuid4().hex[:8]}"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    created: list[str] = []

    def write(name: str, source: str = "") -> str:
        parts = name.split(".")
        folder = root
        for package in parts[:-1]:
            folder = folder / package
            folder.mkdir(exist_ok=True)
            (folder / "__init__.py").touch()
        (folder / f"{parts[-1]}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()  # the finder may have listed this folder already
        created.append(name)
        return name

    yield write
    for name in list(sys.modules):
        if any(name == c or name.startswith(c.split(".")[0] + ".") or name == c.split(".")[0]
               for c in created):
            sys.modules.pop(name, None)


@pytest.fixture
def run_cli(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """``run_cli(pm, *args, env=None)``: run the ``openenv`` app in-process with ``pm`` as the
    process-wide plugin manager; returns typer's ``Result`` (wide terminal, no colour)."""
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    use = request.getfixturevalue("use_plugin_manager")

    def run(pm, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        use(pm)
        argv = list(args)
        return CliRunner().invoke(build_app(argv), argv,
                                  env={"COLUMNS": "200", "NO_COLOR": "1", **(env or {})})

    return run
