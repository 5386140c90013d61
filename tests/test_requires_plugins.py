"""The ``requires_plugins`` marker (the repository's ``conftest.py``) and the rule that keeps
``nox -s integration`` from losing tests: a package test that needs another package of this
repository says so with the marker, never with an ad-hoc import skip that the integration
session's ``-m requires_plugins`` selection cannot see."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_TESTS = [ROOT / "kernel" / "tests", *sorted(ROOT.glob("plugins/*/tests")), *sorted(ROOT.glob("envs/*/tests"))]


def _module_declares_marker(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                     for t in node.targets)
               and "requires_plugins" in ast.unparse(node.value) for node in tree.body)


def _ad_hoc_plugin_skips(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line`` of each ``importorskip("openenv_...")`` / ``find_spec("openenv_...")`` that is
    not a module-level import in a module marked ``requires_plugins``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_level = {id(node.value) for node in tree.body if isinstance(node, ast.Assign | ast.Expr)}
    marked = _module_declares_marker(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"importorskip", "find_spec"} and node.args
                and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("openenv_")):
            continue
        if node.func.attr == "importorskip" and id(node) in module_level and marked:
            continue  # skips collection where missing; the module's marker selects it in integration
        found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_package_tests_declare_the_plugins_they_need_with_the_marker() -> None:
    found = [hit for folder in PACKAGE_TESTS for path in sorted(folder.rglob("*.py"))
             for hit in _ad_hoc_plugin_skips(path)]
    assert not found, (
        "these package tests skip on a missing plugin by hand, so `nox -s integration` (which runs only "
        "package tests marked requires_plugins) never runs them; use "
        "@pytest.mark.requires_plugins(\"transport-ws\", ...) instead (a module-level importorskip is fine "
        "when the module's pytestmark carries the marker):\n" + "\n".join(found))


def test_the_rule_finds_ad_hoc_skips_and_accepts_a_marked_module(tmp_path: Path) -> None:
    sample = tmp_path / "test_sample.py"
    sample.write_text("import pytest\n\ndef test_x():\n    pytest.importorskip('openenv_transport_ws')\n"
                      "    assert importlib.util.find_spec('openenv_env_echo')\n")
    assert len(_ad_hoc_plugin_skips(sample, tmp_path)) == 2
    sample.write_text("import pytest\n\nws = pytest.importorskip('openenv_transport_ws')\n"
                      "pytestmark = pytest.mark.requires_plugins('transport-ws')\n")
    assert _ad_hoc_plugin_skips(sample, tmp_path) == []


SAMPLE = """
import pytest
import conftest

# Stand in for a machine where the web plugin is not installed (everything else is).
conftest._installed = lambda name: name != "web"

@pytest.mark.requires_plugins("transport-ws")
def test_installed():
    pass

@pytest.mark.requires_plugins("transport-ws", "web")
def test_missing():
    pass
"""


def _run_sample(tmp_path: Path, source: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_sample.py").write_text(textwrap.dedent(source))
    # The repository's conftest.py loaded as a plugin (-p conftest), from a folder outside the checkout.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-rs",
                           "-o", "markers=requires_plugins", str(tmp_path / "test_sample.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_a_missing_plugin_skips_with_the_distribution_named(tmp_path: Path) -> None:
    out = _run_sample(tmp_path, SAMPLE, OPENENV_REQUIRE_PLUGINS="0")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed, 1 skipped" in out.stdout
    assert "needs openenvkit-web (installed together in `nox -s integration`)" in out.stdout


def test_with_openenv_require_plugins_a_missing_plugin_fails(tmp_path: Path) -> None:
    out = _run_sample(tmp_path, SAMPLE, OPENENV_REQUIRE_PLUGINS="1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 passed, 1 error" in out.stdout  # failed in setup
    assert "needs openenvkit-web, which is not installed although OPENENV_REQUIRE_PLUGINS=1" in out.stdout


@pytest.mark.parametrize(("name", "hint"), [("transport-wss", "Did you mean 'transport-ws'?"),
                                            ("openenvkit-rubrics", "Did you mean 'rubrics'?")])
def test_a_misspelt_name_stops_the_run_with_a_suggestion(tmp_path: Path, name: str, hint: str) -> None:
    out = _run_sample(tmp_path, f"import pytest\n\n@pytest.mark.requires_plugins({name!r})\ndef test_x():\n    pass\n")
    assert out.returncode == 4, out.stdout + out.stderr  # pytest's usage error
    assert f"requires_plugins({name!r}) names no plugin or env of this repository" in out.stderr
    assert hint in out.stderr
