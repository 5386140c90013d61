"""Two structural rules of the kernel, each guarded here.

* **A reminder, not a rule: modules past ~500 lines.** Every ``.py`` file under
  ``kernel/src/openenv`` is counted the way ``wc -l`` counts (newline characters) and those past
  ``SOFT_MAX_LINES`` are named in a warning (``pytest -rw`` lists it). Size is a smell to look at,
  never a reason to cut a module where it has no seam (docs/STYLE: "a size limit is a reminder").
* **No ``interfaces`` ↔ ``server`` cycle.** ``openenv.server`` builds on the plugin contract
  (``openenv.interfaces``, ``openenv.context``), so the contract must never reach back: neither
  module names ``openenv.server`` in any import (even under ``TYPE_CHECKING`` or in a function),
  nothing they import at module level reaches it, and importing them in a fresh interpreter loads
  neither ``openenv.server`` nor starlette.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import openenv

KERNEL_SRC = Path(openenv.__file__).resolve().parent
SOFT_MAX_LINES = 500
#: The plugin contract: what every plugin imports, and what must not pull in the app assembly.
CONTRACT = ("openenv.interfaces", "openenv.context")
FORBIDDEN = "openenv.server"


def wc_lines(path: Path) -> int:
    """Lines as ``wc -l`` counts them: the number of newline bytes."""
    return path.read_bytes().count(b"\n")


def test_wc_lines_counts_like_wc(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes(b"x = 1\ny = 2")  # no trailing newline: wc -l says 1
    assert wc_lines(tmp_path / "a.py") == 1
    (tmp_path / "b.py").write_bytes(b"x = 1\n\n\n")
    assert wc_lines(tmp_path / "b.py") == 3


class LongModuleReminder(UserWarning):
    """Kernel modules past ``SOFT_MAX_LINES``: worth a look, not a failure."""


def test_long_kernel_modules_are_named_in_a_reminder() -> None:
    sizes = {path.relative_to(KERNEL_SRC).as_posix(): wc_lines(path) for path in KERNEL_SRC.rglob("*.py")}
    assert len(sizes) > 50, f"found only {len(sizes)} modules under {KERNEL_SRC}"
    long = {name: lines for name, lines in sizes.items() if lines > SOFT_MAX_LINES}
    if long:
        warnings.warn(LongModuleReminder(
            f"kernel modules past {SOFT_MAX_LINES} lines (look for a real seam; do not cut without one): "
            + ", ".join(f"{name} ({lines})" for name, lines in sorted(long.items()))), stacklevel=1)


# --- the import rule -----------------------------------------------------------------------------


def _module_file(module: str) -> Path | None:
    """The source file of an ``openenv`` module, or None if ``module`` is not one."""
    parts = module.split(".")
    if parts[0] != "openenv":
        return None
    base = KERNEL_SRC.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(KERNEL_SRC).with_suffix("")
    parts = ["openenv", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    package = current.split(".") if is_package else current.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _names(node: ast.Import | ast.ImportFrom, current: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = _absolute(node, current, is_package)
    # `from openenv import server` imports the submodule; `from openenv.x import y` may too.
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(source: str, current: str, *, is_package: bool = False,
               import_time_only: bool) -> set[str]:
    """The modules ``source`` imports. With ``import_time_only``, only statements that run when the
    module is imported: not under ``if TYPE_CHECKING:`` and not inside a function body."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                found.update(_names(stmt, current, is_package))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not import_time_only:
                    visit(stmt.body)
            elif isinstance(stmt, ast.If) and _is_type_checking(stmt.test):
                if not import_time_only:
                    visit(stmt.body)
                visit(stmt.orelse)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(stmt, field, None)
                    if isinstance(inner, list):
                        visit([s for s in inner if isinstance(s, ast.stmt)]
                              + [s for h in inner if isinstance(h, ast.ExceptHandler) for s in h.body])

    visit(ast.parse(source).body)
    return found


def _reaches(module: str, path: Path) -> list[str] | None:
    """The chain of module-level imports from ``module`` to ``FORBIDDEN``, or None."""
    seen = {module}
    queue: list[tuple[str, list[str]]] = [(module, [module])]
    while queue:
        name, chain = queue.pop(0)
        file = _module_file(name)
        if file is None:
            continue
        # Importing a.b.c runs the __init__ of a and a.b first.
        parents = [".".join(name.split(".")[:i]) for i in range(2, len(name.split(".")))]
        targets = imports_of(file.read_text(), name, is_package=file.name == "__init__.py",
                             import_time_only=True) | set(parents)
        for target in sorted(targets):
            if target == FORBIDDEN or target.startswith(FORBIDDEN + "."):
                return [*chain, target]
            if target not in seen and _module_file(target) is not None:
                seen.add(target)
                queue.append((target, [*chain, target]))
    return None


@pytest.mark.parametrize("module", CONTRACT)
def test_the_contract_never_names_the_server_module(module: str) -> None:
    path = _module_file(module)
    assert path is not None
    imported = imports_of(path.read_text(), module, import_time_only=False)
    bad = sorted(name for name in imported if name == FORBIDDEN or name.startswith(FORBIDDEN + "."))
    assert not bad, f"{module} imports {bad}: the server builds on the contract, never the other way round"


@pytest.mark.parametrize("module", CONTRACT)
def test_the_contract_does_not_reach_the_server_at_import_time(module: str) -> None:
    path = _module_file(module)
    assert path is not None
    chain = _reaches(module, path)
    assert chain is None, "import chain from the contract to the server: " + " -> ".join(chain or [])


def test_the_server_builds_on_the_contract() -> None:
    """The other half of the cycle: so the contract must be the side that never reaches back."""
    server = _module_file(FORBIDDEN)
    assert server is not None
    assert "openenv.interfaces" in imports_of(server.read_text(), FORBIDDEN, import_time_only=True)


@pytest.mark.parametrize("module", CONTRACT)
def test_importing_the_contract_loads_no_server_and_no_starlette(module: str) -> None:
    code = (f"import sys, {module}\n"
            "print(','.join(sorted(m for m in sys.modules "
            f"if m == {FORBIDDEN!r} or m.startswith({FORBIDDEN + '.'!r}) or m.split('.')[0] == 'starlette')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "", f"importing {module} loaded: {out.stdout.strip()}"


def test_the_checker_sees_a_planted_import() -> None:
    """Self-check: the AST walk finds imports in every place the rule covers."""
    source = ("from typing import TYPE_CHECKING\n"
              "if TYPE_CHECKING:\n    from openenv.server import create_app\n"
              "def f():\n    import openenv.server\n"
              "try:\n    from . import server\nexcept ImportError:\n    pass\n")
    assert {"openenv.server", "openenv.server.create_app"} <= imports_of(
        source, "openenv.interfaces", import_time_only=False)
    at_import = imports_of(source, "openenv.interfaces", import_time_only=True)
    assert "openenv.server" in at_import  # via `from . import server` in the try block
    assert "openenv.server.create_app" not in at_import


# --- one mode vocabulary -------------------------------------------------------------------------


def mode_lists(source: str) -> list[int]:
    """Lines of tuple/list/set literals that spell both mode names (the vocabulary of ``Mode``)."""
    lines: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = {elt.value for elt in node.elts if isinstance(elt, ast.Constant)}
            if {"simulation", "production"} <= values:
                lines.append(node.lineno)
    return lines


def test_the_mode_names_are_spelled_only_in_openenv_modes() -> None:
    assert mode_lists("MODES = ('simulation', 'production')\n") == [1]  # the check sees a copy
    copies = {path.relative_to(KERNEL_SRC).as_posix(): found for path in KERNEL_SRC.rglob("*.py")
              if path.name != "modes.py" and (found := mode_lists(path.read_text()))}
    assert not copies, f"mode names spelled outside openenv.modes (use openenv.modes.Mode): {copies}"


def test_kernel_docs_cite_the_protocol_document_not_a_bare_spec_label() -> None:
    bare = re.compile(r"\bspec B\d")
    found = [f"{path.relative_to(KERNEL_SRC).as_posix()}:{n}" for path in KERNEL_SRC.rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if bare.search(line)]
    assert not found, f"cite docs/protocol.md §11 (the upstream defects) instead of 'spec B…': {found}"


def test_server_config_fields_are_typed() -> None:
    """Every ``ServerConfig`` field has a real type (free-form values live in typed containers)."""
    import dataclasses

    from openenv.context import ServerConfig

    bare = [f.name for f in dataclasses.fields(ServerConfig) if str(f.type) in {"Any", "typing.Any"}]
    assert not bare, f"ServerConfig fields typed Any: {bare}"
