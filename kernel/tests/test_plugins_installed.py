"""End to end: real plugin distributions installed next to the kernel in a fresh venv.

Two tiny packages are built from source in a temporary folder: ``openenv-tiny-plugin`` (registers
the env ``tiny`` lazily, with an ``openenv.yaml``) and ``openenv-broken-plugin`` (its hook module
imports a library that is not installed). The CLI then runs with that venv's interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_lazy_imports import imported_by

pytestmark = pytest.mark.slow

KERNEL = Path(__file__).resolve().parents[1]

TINY_FILES = {
    "pyproject.toml": """
        [project]
        name = "openenv-tiny-plugin"
        version = "0.3.0"
        requires-python = ">=3.11"
        dependencies = ["openenvkit"]

        [project.entry-points.openenv]
        tiny = "openenv_tiny_plugin.plugin"

        [build-system]
        requires = ["hatchling>=1.24"]
        build-backend = "hatchling.build"

        [tool.hatch.build.targets.wheel]
        packages = ["src/openenv_tiny_plugin"]
        """,
    "src/openenv_tiny_plugin/__init__.py": '"""A tiny test plugin."""\n',
    "src/openenv_tiny_plugin/plugin.py": """
        from openenv import hookimpl

        @hookimpl
        def openenv_register_envs(registry):
            registry.register("tiny", "openenv_tiny_plugin.env:TinyEnv",
                              description="The tiniest env.", manifest="openenv.yaml")
        """,
    "src/openenv_tiny_plugin/openenv.yaml": """
        spec_version: 1
        name: tiny
        version: 0.3.0
        type: space
        runtime: fastapi
        app: openenv_tiny_plugin.env:app
        port: 8000
        tags: [test]
        """,
    "src/openenv_tiny_plugin/env.py": """
        from openenv import Environment, Observation, State

        class TinyEnv(Environment):
            def reset(self, seed=None, episode_id=None, **kw):
                return Observation()

            def step(self, action, timeout_s=None, **kw):
                return Observation(done=True, reward=1.0)

            @property
            def state(self):
                return State()
        """,
}

BROKEN_FILES = {
    "pyproject.toml": """
        [project]
        name = "openenv-broken-plugin"
        version = "0.0.1"
        requires-python = ">=3.11"
        dependencies = ["openenvkit"]

        [project.entry-points.openenv]
        broken = "openenv_broken_plugin.plugin"

        [build-system]
        requires = ["hatchling>=1.24"]
        build-backend = "hatchling.build"

        [tool.hatch.build.targets.wheel]
        packages = ["src/openenv_broken_plugin"]
        """,
    "src/openenv_broken_plugin/__init__.py": "",
    "src/openenv_broken_plugin/plugin.py": "import not_installed_sdk_xyz  # noqa: F401\n",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("OPENENV_") and k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("`uv` is not on PATH: it is needed to build a fresh venv for this test")
    root = tmp_path_factory.mktemp("installed")
    tiny = write_tree(root / "tiny", TINY_FILES)
    broken = write_tree(root / "broken", BROKEN_FILES)
    venv_dir = root / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv_dir)],
                   check=True, env=clean_env(), timeout=300)
    python = venv_dir / "bin" / "python"
    subprocess.run([uv, "pip", "install", "-q", "--python", str(python), "-e", str(KERNEL),
                    str(tiny), str(broken)], check=True, env=clean_env(), timeout=600)
    return venv_dir


def run(venv: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "python"), *args], capture_output=True, text=True,
                          timeout=120, env=clean_env(**env), cwd=venv.parent, check=False)


def test_plugins_list_shows_the_installed_plugins(venv: Path) -> None:
    # the console script itself, as a user would run it
    proc = subprocess.run([str(venv / "bin" / "openenv"), "plugins", "list", "--json"],
                          capture_output=True, text=True, timeout=120, env=clean_env(),
                          check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "openenv.plugins/1"
    rows = {r["name"]: r for r in doc["plugins"]}
    assert set(rows) == {"tiny", "broken"}
    tiny = rows["tiny"]
    assert tiny["provides"] == {"env": ["tiny"]}
    assert (tiny["dist"], tiny["version"], tiny["module"], tiny["status"]) == (
        "openenv-tiny-plugin", "0.3.0", "openenv_tiny_plugin.plugin", "ok")
    assert tiny["hooks"] == ["openenv_register_envs"]
    broken = rows["broken"]
    assert broken["status"] == "error" and broken["dist"] == "openenv-broken-plugin"
    assert broken["error"] == ("import failed: ModuleNotFoundError: No module named "
                               "'not_installed_sdk_xyz'")


def test_strict_mode_fails_with_a_readable_message(venv: Path) -> None:
    proc = run(venv, "-m", "openenv", "plugins", "list", OPENENV_STRICT_PLUGINS="1")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: Plugin 'broken' failed: import failed: "
                                  "ModuleNotFoundError: No module named 'not_installed_sdk_xyz'")
    assert "Traceback" not in proc.stderr


def test_envs_list_shows_tiny_without_importing_it(venv: Path) -> None:
    imported, proc = imported_by(
        ["envs", "list", "--json"], venv.parent, python=str(venv / "bin" / "python"),
        env=clean_env(OPENENV_STRICT_PLUGINS="1", OPENENV_DISABLE_PLUGINS="broken"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)["envs"]
    assert (row["name"], row["plugin"], row["ref"], row["description"]) == (
        "tiny", "tiny", "openenv_tiny_plugin.env:TinyEnv", "The tiniest env.")
    assert row["manifest"]["name"] == "tiny" and row["manifest"]["tags"] == ["test"]
    assert row["manifest"]["app"] == "openenv_tiny_plugin.env:app"
    assert Path(row["manifest_path"]).name == "openenv.yaml"
    assert "openenv_tiny_plugin.plugin" in imported
    assert "openenv_tiny_plugin.env" not in imported


def test_the_lazy_reference_loads_the_real_env(venv: Path) -> None:
    code = ("from openenv.plugins import get_plugin_manager\n"
            "env_cls = get_plugin_manager().catalog.envs.load('tiny')\n"
            "print(env_cls.__name__, env_cls().step(None).reward)\n")
    proc = run(venv, "-c", code, OPENENV_LOAD_PLUGINS="tiny")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["TinyEnv", "1.0"]
