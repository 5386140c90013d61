"""The build context (env package reading, workspace wheels, Dockerfile, input hash) and the
plugin's registrations, without an engine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.errors import ConfigError
from openenv_provider_docker.context import (
    dockerfile,
    image_requirements,
    inputs_hash,
    installed_source,
    local_packages,
    read_env_package,
)


def test_reads_the_echo_package(echo_dir: Path) -> None:
    pkg = read_env_package(echo_dir)
    assert (pkg.dist, pkg.version, pkg.env) == ("openenvkit-env-echo", "0.1.0", "echo")
    assert pkg.read_only_root is True
    assert read_env_package(echo_dir, env="echo_async").env == "echo_async"


def test_a_folder_without_an_openenv_entry_point_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"has no pyproject\.toml"):
        read_env_package(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    with pytest.raises(ConfigError, match=r"(?s)registers no `openenv` entry point.*\[project.entry-points.openenv\]"):
        read_env_package(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_env_package(tmp_path)


def test_manifest_can_ask_for_a_writable_root(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "my-env"\nversion = "2.0"\n[project.entry-points.openenv]\nmine = "m.plugin"\n')
    assert read_env_package(tmp_path).env == "mine"  # no manifest: the entry point's name
    (tmp_path / "openenv.yaml").write_text("name: writer\nread_only_root: false\n")
    pkg = read_env_package(tmp_path)
    assert (pkg.env, pkg.read_only_root) == ("writer", False)


def test_workspace_packages_the_image_needs(echo_dir: Path, repo_root: Path) -> None:
    folders = {p.relative_to(repo_root).as_posix() for p in local_packages(read_env_package(echo_dir))}
    assert folders == {"envs/echo", "kernel", "plugins/rubrics", "plugins/transport-ws"}  # echo scores with a rubric
    assert image_requirements(read_env_package(echo_dir)) == ["openenvkit-env-echo", "openenvkit-transport-ws"]


def test_dockerfile_installs_offline_and_runs_unprivileged(echo_dir: Path) -> None:
    pkg = read_env_package(echo_dir)
    text = dockerfile(pkg, base_image="openenv-base:bookworm", python="python3", python_version="3.11",
                      build_hash="abc")
    assert text.count("FROM openenv-base:bookworm") == 2  # two stages: the wheels stay behind
    assert "pip install --no-index --find-links /wheels" in text
    assert "openenvkit-env-echo openenvkit-transport-ws" in text
    assert "USER 10001:10001" in text
    assert "EXPOSE 8000" in text
    assert ('CMD ["/opt/venv/bin/python", "-m", "openenv", "serve", "echo", "--host", "0.0.0.0", '
            '"--port", "8000", "--allow-open"]') in text
    for label in ('org.openenv.env="echo"', 'org.openenv.serve="1"', 'org.openenv.version="0.1.0"',
                  'org.openenv.read-only-root="true"', 'org.openenv.build-hash="abc"'):
        assert label in text
    # The classic builder (and Podman) must be able to build it: no BuildKit-only syntax.
    assert "--mount=" not in text and "# syntax" not in text


def test_input_hash_follows_the_sources(tmp_path: Path, echo_dir: Path) -> None:
    copy = tmp_path / "echo"
    shutil.copytree(echo_dir, copy, ignore=shutil.ignore_patterns("__pycache__"))
    first = inputs_hash([copy], "base@1")
    assert inputs_hash([copy], "base@1") == first
    assert inputs_hash([copy], "base@2") != first
    (copy / "tests" / "ignored.py").write_text("x = 1\n")  # tests are not in the image
    assert inputs_hash([copy], "base@1") == first
    env_py = copy / "src" / "openenv_env_echo" / "env.py"
    env_py.write_text(env_py.read_text() + "\n# changed\n")
    assert inputs_hash([copy], "base@1") != first


def test_plugin_registers_the_provider_and_the_build_command_lazily() -> None:
    code = (
        "import sys\n"
        "from openenv.plugins import PluginManager\n"
        "import openenv_provider_docker.plugin as plugin\n"
        "pm = PluginManager(strict=True, entry_points=[])\n"
        "pm.register(plugin, 'docker')\n"
        "cat = pm.catalog\n"
        "print(cat.providers.get('docker').ref_text, cat.commands.get('build').ref_text)\n"
        "print('docker' in sys.modules, 'openenv_provider_docker.provider' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    refs, imported = out.splitlines()
    assert refs == "openenv_provider_docker.provider:DockerProvider openenv_provider_docker.cli:build"
    assert imported == "False False"  # listing plugins never imports the Docker SDK


@pytest.mark.requires_plugins("transport-ws")  # the scaffold depends on it: it must be installed to be found
def test_outside_a_workspace_our_packages_come_from_the_folders_they_were_installed_from(
        tmp_path: Path, repo_root: Path) -> None:
    """`openenv init my_game` in any folder, then `openenv build/push` there: the kernel and the ws
    transport are not on an index, so they are built from where this Python installed them."""
    from openenv.cli.init_cmd import scaffold

    assert installed_source("openenvkit") == repo_root / "kernel"  # premise: an editable install
    scaffold("my_game", tmp_path / "my_game")
    pkg = read_env_package(tmp_path / "my_game")
    folders = set(local_packages(pkg))
    assert {pkg.path, repo_root / "kernel", repo_root / "plugins" / "transport-ws"} <= folders
    assert installed_source("pydantic") is None  # from an index: pip collects it as before


def test_a_local_package_wheel_is_built_once_and_kept_in_the_wheel_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import openenv_provider_docker.context as context

    monkeypatch.setenv("OPENENV_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "lib"
    (src / "src" / "tiny_lib").mkdir(parents=True)
    (src / "src" / "tiny_lib" / "__init__.py").write_text("X = 1\n", encoding="utf-8")
    (src / "pyproject.toml").write_text(
        '[project]\nname = "tiny-lib"\nversion = "0.1.0"\n[build-system]\nrequires = ["hatchling"]\n'
        'build-backend = "hatchling.build"\n[tool.hatch.build.targets.wheel]\npackages = ["src/tiny_lib"]\n',
        encoding="utf-8")
    builds: list[Path] = []
    real = context.build_local_wheel

    def counting(folder: Path, out: Path) -> None:
        builds.append(folder)
        real(folder, out)

    monkeypatch.setattr(context, "build_local_wheel", counting)
    for n in range(2):
        out = tmp_path / f"ctx{n}"
        out.mkdir()
        cached = context.cached_local_wheel(src, out)
        assert (out / cached.name).is_file() and cached.is_relative_to(context.wheel_cache())
    assert builds == [src]  # the second context got the cached wheel
    (src / "src" / "tiny_lib" / "__init__.py").write_text("X = 2\n", encoding="utf-8")
    (tmp_path / "ctx2").mkdir()
    context.cached_local_wheel(src, tmp_path / "ctx2")
    assert builds == [src, src]  # changed sources: rebuilt
