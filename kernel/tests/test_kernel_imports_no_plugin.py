"""The kernel imports no plugin: plugins depend on the kernel, never the other way round.

Every module under ``kernel/src/openenv`` is parsed; an ``import openenv_x`` / ``from openenv_x
import ...`` statement, or an ``importlib.import_module("openenv_x...")`` call with a literal name,
fails the test. What the kernel needs from a plugin reaches it through the catalogue.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openenv

KERNEL_SRC = Path(openenv.__file__).resolve().parent


def _plugin_package(name: str) -> bool:
    return name.split(".", 1)[0].startswith("openenv_")


def plugin_imports(source: str, filename: str) -> list[str]:
    """``"line: module"`` for every import of an ``openenv_*`` package in ``source``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found.extend(f"{node.lineno}: {name}" for name in names if _plugin_package(name))
    return found


def test_the_scanner_sees_every_import_form() -> None:
    source = (
        "import os\nimport openenv_transport_ws\nfrom openenv_transport_mcp.client import X\n"
        "from openenv.tools import tool\nimport importlib\nimportlib.import_module('openenv_env_echo.env')\n"
        "from . import openenv_like\n"
    )
    assert plugin_imports(source, "<test>") == [
        "2: openenv_transport_ws", "3: openenv_transport_mcp.client", "6: openenv_env_echo.env",
    ]


def test_kernel_source_imports_no_plugin_package() -> None:
    files = sorted(KERNEL_SRC.rglob("*.py"))
    assert len(files) > 20, f"kernel sources not found under {KERNEL_SRC}"
    offenders = [
        f"{path.relative_to(KERNEL_SRC.parent)}:{hit}"
        for path in files
        for hit in plugin_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert not offenders, (
        "The kernel must not import plugin packages (they depend on it, not the reverse). Declare "
        "what the kernel needs in the catalogue and let the plugin register it:\n" + "\n".join(offenders)
    )


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env}, check=False)


@pytest.mark.requires_plugins("transport-mcp")
def test_mcp_client_comes_from_the_catalogue_entry_of_the_plugin() -> None:
    code = (
        "import sys\n"
        "from openenv.core.mcp_client import MCPClientBase, MCPToolClient, ToolCallFailed\n"
        "import openenv_transport_mcp.client as plugin\n"
        "assert issubclass(MCPToolClient, plugin.MCPToolClient) and MCPClientBase is MCPToolClient\n"
        "assert ToolCallFailed is plugin.ToolCallFailed\n"
        "print(MCPToolClient.__module__, MCPToolClient.__qualname__)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["openenv.core.mcp_client", "MCPToolClient"]


def test_without_a_tool_client_plugin_the_import_says_what_to_install() -> None:
    code = (
        "import openenv.core.mcp_client\n"  # importing the module itself needs no plugin
        "try:\n"
        "    from openenv.core.mcp_client import MCPToolClient\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
        "else:\n"
        "    raise SystemExit('MCPToolClient resolved without the plugin')\n"
    )
    done = _run(code, OPENENV_DISABLE_PLUGINS="mcp")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pip install openenvkit-transport-mcp" in done.stdout
    assert "no installed transport declares one" in done.stdout
