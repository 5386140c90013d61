"""The kernel's start-up guard (kernel/tests/test_lazy_imports.py) with every plugin of the repository
installed: `nox -s kernel` runs it with the kernel alone, where no plugin hook module can break it;
here each plugin's hook module (and its package ``__init__``) must keep the CLI free of the server
stack too."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

_GUARD = Path(__file__).resolve().parents[1] / "kernel" / "tests" / "test_lazy_imports.py"


def _guard() -> Any:
    spec = importlib.util.spec_from_file_location("openenv_kernel_lazy_import_guard", _GUARD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GUARD = _guard()


@pytest.mark.parametrize("args", GUARD.COMMANDS, ids=" ".join)
def test_the_cli_imports_no_server_stack_with_every_plugin_installed(args: list[str], tmp_path: Path) -> None:
    GUARD.test_cli_imports_no_plugin_internals_or_server_stack(args, tmp_path)
