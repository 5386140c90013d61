"""What the plugins, envs and templates import from the kernel is public: no ``openenv._x``
module and no ``_name`` (a kernel refactor may change anything private without notice)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [*sorted(ROOT.glob("plugins/*/src")), *sorted(ROOT.glob("envs/*/src")), *sorted(ROOT.glob("templates/*/src"))]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_kernel_imports(path: Path) -> list[str]:
    """``line: statement`` for each import of a private kernel module or name in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "openenv":
            names = [alias.name for alias in node.names]
            if any(_private(part) for part in node.module.split(".")) or any(map(_private, names)):
                found.append(f"{node.lineno}: from {node.module} import {', '.join(names)}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {alias.name}" for alias in node.names
                      if alias.name.split(".")[0] == "openenv" and any(map(_private, alias.name.split(".")))]
    return found


def test_packages_import_only_public_kernel_names() -> None:
    found = [f"{path.relative_to(ROOT)}:{hit}" for src in SOURCES for path in sorted(src.rglob("*.py"))
             for hit in private_kernel_imports(path)]
    assert not found, ("import the public name instead (e.g. openenv.cli.output for a plugin command's "
                       "output), or make the kernel name public:\n" + "\n".join(found))


def test_the_rule_sees_private_modules_and_names(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from openenv.cli._output import fail\nfrom openenv.client import _reward\n"
                      "import openenv._private\nfrom openenv.cli.output import fail as ok\nimport openenv.__main__\n")
    assert [hit.split(":")[0] for hit in private_kernel_imports(sample)] == ["1", "2", "3"]
