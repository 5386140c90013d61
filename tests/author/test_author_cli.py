"""``openenv init``, ``push``, ``envs search/show`` and the manifest reference, through the real CLI
in subprocesses (and huggingface_hub against a local HTTP server for ``push --hf-space``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openenv.manifest import Manifest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def openenv(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openenv", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


def test_every_manifest_field_is_documented() -> None:
    doc = (ROOT / "docs" / "manifest.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")}
    rows = {row for row in rows if "." not in row}  # `resources.cpu` etc.: keys inside an extra mapping
    missing = set(Manifest.model_fields) - rows
    assert not missing, f"fields of openenv.manifest.Manifest missing from docs/manifest.md: {sorted(missing)}"
    assert not rows - set(Manifest.model_fields), "docs/manifest.md documents fields the model does not have"


def test_root_help_lists_the_author_commands(tmp_path: Path) -> None:
    for _ in range(2):  # a cache miss, then the cached text
        out = openenv("--help", env={"OPENENV_CACHE_DIR": str(tmp_path)})
        assert out.returncode == 0
        for command in ("init", "validate", "push", "envs"):
            assert f" {command} " in out.stdout, (command, out.stdout)


def test_init_refuses_to_overwrite_and_bad_names(tmp_path: Path) -> None:
    assert openenv("init", "my_env", cwd=tmp_path).returncode == 0
    again = openenv("init", "my_env", cwd=tmp_path)
    assert again.returncode == 2 and "my_env already exists" in again.stderr and "never overwrites" in again.stderr
    bad = openenv("init", "My-Env", cwd=tmp_path)
    assert bad.returncode == 2 and "Did you mean 'my_env'?" in bad.stderr
    near = openenv("init", "echo_mc", cwd=tmp_path)
    assert near.returncode == 2 and "did you mean to use 'echo_mcp'" in near.stderr
    taken = openenv("init", "maze", cwd=tmp_path)
    assert taken.returncode == 2 and "already installed" in taken.stderr
    reserved = openenv("init", "step", cwd=tmp_path)
    assert reserved.returncode == 2 and "reserved" in reserved.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["my_env"]


@pytest.mark.parametrize("mcp", [False, True])
def test_a_scaffold_readme_lists_the_files_it_has(mcp: bool) -> None:
    import re

    from openenv.cli.init_cmd import render

    files = render("demo", mcp=mcp)
    named = set(re.findall(r"`(?:src/[a-z_]+/)?([\w.]+\.(?:py|yaml))`", files["README.md"]))
    have = {path.rsplit("/", 1)[-1] for path in files}
    assert named and named <= have, (sorted(named - have), sorted(have))
    assert ("models.py" in named) is not mcp


@pytest.mark.parametrize("variant", [[], ["--mcp", "--dockerfile"]])
def test_a_scaffold_validates_from_its_folder(tmp_path: Path, variant: list[str]) -> None:
    name = "tool_demo" if variant else "plain_demo"
    made = openenv("init", name, "--dir", str(tmp_path / "pkg"), *variant)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "pkg" / "Dockerfile").is_file() == bool(variant)
    result = openenv("validate", str(tmp_path / "pkg"), "--json")
    doc = json.loads(result.stdout)
    assert result.returncode == 0 and doc["ok"], [c for c in doc["checks"] if c["status"] == "fail"]
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses["tools"] == ("pass" if variant else "n/a")
    assert statuses["oracle"] == ("n/a" if variant else "pass")
    if not variant:  # the plain template refuses out-of-order steps, as a new env should
        details = {c["name"]: c["detail"] for c in doc["checks"]}
        for check in ("step_before_reset", "step_after_done"):
            assert statuses[check] == "pass" and details[check].startswith("refused with a structured error"), \
                (check, details[check])


def test_envs_search_ranks_and_show_describes() -> None:
    found = openenv("envs", "search", "navigation grid", "--json")
    names = [r["name"] for r in json.loads(found.stdout)["results"]]
    assert names[0] == "grid_world" and "maze" in names and "echo" not in names
    none = openenv("envs", "search", "zzzz-no-such-thing")
    assert none.returncode == 1 and "No installed env matches" in none.stdout
    shown = json.loads(openenv("envs", "show", "echo_mcp", "--json").stdout)
    assert {t["name"] for t in shown["tools"]} == {"echo_message", "echo_with_length"}
    assert shown["manifest"]["reward_range"] == [0.0, 0.0] and shown["load_error"] is None
    assert shown["provider_hints"]["max_sessions"].startswith("many")
    typed = json.loads(openenv("envs", "show", "echo", "--json").stdout)
    assert "message" in typed["action_schema"]["properties"]
    unknown = openenv("envs", "show", "ecko")
    assert unknown.returncode == 2 and "Did you mean 'echo'" in unknown.stderr


def test_push_dry_run_shows_what_would_be_sent_and_sends_nothing(tmp_path: Path) -> None:
    plan = openenv("push", str(ROOT / "envs" / "echo"), "--registry", "127.0.0.1:9/echo", "--dry-run")
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["dry_run"] and doc["build"]["env"] == "echo" and doc["image"] == "openenv-echo:0.1.0"
    assert doc["push"] == ["127.0.0.1:9/echo:0.1.0"]
    # the base image a build failure's hint tells the user to pass is an option of push too
    based = openenv("push", str(ROOT / "envs" / "echo"), "--registry", "127.0.0.1:9/echo", "--dry-run",
                    "--base-image", "openenv-base:test")
    assert based.returncode == 0, based.stderr
    assert json.loads(based.stdout)["build"]["base_image"] == "openenv-base:test"
    assert openenv("init", "space_demo", "--dir", str(tmp_path / "pkg")).returncode == 0
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    space = json.loads(openenv("push", str(tmp_path / "pkg"), "--hf-space", "alice/space-demo", "--dry-run",
                               env={"HF_ENDPOINT": "http://127.0.0.1:9"}).stdout)
    files = {f["path"] for f in space["files"]}
    assert {"Dockerfile", "README.md", "pyproject.toml", "src/openenv_env_space_demo/env.py"} <= files
    assert not any("__pycache__" in f for f in files) and space["space_sdk"] == "docker"


def test_push_bad_input_is_one_line() -> None:
    both = openenv("push", ".", "--registry", "127.0.0.1:5000/x", "--hf-space", "a/b")
    assert both.returncode == 2 and "exactly one of" in both.stderr
    bad_ref = openenv("push", "openenv-echo:0.1.0", "--registry", "not a registry", "--dry-run")
    assert bad_ref.returncode == 2 and "HOST:PORT/NAME" in bad_ref.stderr
    bad_space = openenv("push", str(ROOT / "envs" / "echo"), "--hf-space", "no-slash", "--dry-run")
    assert bad_space.returncode == 2 and "USER/NAME" in bad_space.stderr
    for result in (both, bad_ref, bad_space):
        assert "Traceback" not in result.stderr


def test_push_hf_space_without_huggingface_hub_names_the_right_extra(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked" / "huggingface_hub"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('blocked for the test')\n", encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(blocked.parent), os.environ.get("PYTHONPATH")]))
    result = openenv("push", str(ROOT / "envs" / "echo"), "--hf-space", "alice/echo",
                     env={"PYTHONPATH": path, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "pip install 'openenvkit-provider-docker[hf]'" in result.stderr, result.stderr


#: Where install hints live: the docs, every README, and the sources of the kernel, plugins and envs.
HINT_TEXTS = [ROOT / "README.md", *ROOT.glob("docs/*.md"), *ROOT.glob("*/*/README.md"),
              *ROOT.glob("kernel/src/**/*.py"), *ROOT.glob("plugins/*/src/**/*.py"),
              *ROOT.glob("envs/*/src/**/*.py")]
#: Installers a hint may name although nothing depends on them: what you install the rest with.
INSTALLERS = {"pip", "uv"}
#: Third-party distributions the docs tell users to install, not in uv.lock: upstream's provider
#: packages, installed from the index by ``nox -s upstream_providers``, verifiers, by ``nox -s
#: verifiers``, and openreward, by ``nox -s ors`` (checked against noxfile.py).
INDEX_ONLY = {"openenv-sprites", "openenv-openshell", "verifiers", "openreward", "staros-stardata"}
#: ``pip install`` options followed by a value that is not a distribution (a path, a URL).
VALUE_OPTIONS = {"-e", "--editable", "-f", "--find-links", "-r", "--requirement", "-c", "--constraint",
                 "-i", "--index-url", "--extra-index-url"}


def _workspace_extras() -> dict[str, set[str]]:
    import tomllib

    extras: dict[str, set[str]] = {}
    for pyproject in [ROOT / "kernel" / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml"),
                      *ROOT.glob("envs/*/pyproject.toml")]:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        extras[project["name"]] = set(project.get("optional-dependencies", {}))
    return extras


def _normal(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_install_hint_names_an_extra_that_exists() -> None:
    """``pip install 'DIST[EXTRA]'`` in the docs and the code names a workspace distribution that
    declares that extra (``openenvkit[hf]`` once pointed at nothing)."""
    import re

    extras = _workspace_extras()
    hints = {(path.relative_to(ROOT).as_posix(), dist, extra)
             for path in HINT_TEXTS
             for dist, names in re.findall(r"pip install '([a-z0-9-]+)\[([a-z0-9,-]+)\]'",
                                           path.read_text(encoding="utf-8"))
             for extra in names.split(",")}
    assert hints
    wrong = sorted(hint for hint in hints if hint[2] not in extras.get(hint[1], set()))
    assert not wrong, wrong


def test_every_install_hint_names_a_distribution_that_exists() -> None:
    """Every name after ``pip install`` (``pip install openenvkit-transport-ws``, several names, a
    template such as ``openenvkit-provider-{name}``) is a workspace distribution, a package the lock
    resolves (a real dependency, e.g. ``torch`` for the TRL extra), or an installer
    (``openenv-transport-ws`` once named nothing)."""
    import re
    import tomllib

    workspace = set(_workspace_extras())
    locked = {_normal(package["name"]) for package in
              tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))["package"]}
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert all(re.search(rf"{re.escape(name)}(\[[a-z0-9,-]+\])?==", noxfile) for name in INDEX_ONLY), \
        "INDEX_ONLY names a package no session installs"
    known = workspace | locked | INSTALLERS | INDEX_ONLY
    hints: set[tuple[str, str]] = set()
    for path in HINT_TEXTS:
        text = path.read_text(encoding="utf-8")
        for command in re.findall(r"pip install((?:[ \t]+(?:'[^'\n]*'|[^\s`'\"#&|;)\\]+))+)", text):
            skip_value = False
            for token in command.split():
                token = token.strip("'")
                if skip_value or token.startswith("-") or "/" in token or token.startswith(".") \
                        or token in {"PATH", "..."}:
                    skip_value = token in VALUE_OPTIONS
                    continue
                # No version (even a templated one, ``=={PIN}``) nor extras; ``<name>`` is a template.
                name = token if re.search(r"<[a-z]", token) else re.split(r"[\[=<>~!;@]", token)[0]
                hints.add((path.relative_to(ROOT).as_posix(), name))
    assert {name for _, name in hints} >= {"openenvkit-transport-ws", "openenvkit-provider-{name}"}
    templates = {hint for hint in hints if re.search(r"\{|<[a-z]", hint[1])}
    wrong = sorted(hint for hint in hints - templates if _normal(hint[1]) not in known)
    wrong += sorted(hint for hint in templates  # the fixed part must start some distribution's name
                    if not any(d.startswith(re.split(r"[{<]", hint[1])[0]) for d in workspace)
                    or not re.split(r"[{<]", hint[1])[0])
    assert not wrong, wrong


def test_push_to_a_hf_space_over_its_http_api(tmp_path: Path) -> None:
    sys.path.insert(0, str(HERE))
    from hf_fake import FakeHub

    assert openenv("init", "space_demo", "--dir", str(tmp_path / "pkg")).returncode == 0
    with FakeHub() as hub:
        result = openenv("push", str(tmp_path / "pkg"), "--hf-space", "alice/space-demo",
                         env={"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_test_token", "HF_HUB_DISABLE_XET": "1",
                              "HF_HUB_DISABLE_TELEMETRY": "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{hub.url}/spaces/alice/space-demo"
    assert len(hub.repos) == 1
    assert {k: hub.repos[0].get(k) for k in ("name", "organization", "type", "sdk")} == {
        "name": "space-demo", "organization": "alice", "type": "space", "sdk": "docker"}
    assert hub.commits == ["alice/space-demo"]
    assert hub.files["README.md"].startswith(b"---\ntitle: space_demo\nsdk: docker\napp_port: 8000\n")
    assert b'"serve", "space_demo"' in hub.files["Dockerfile"]
    assert hub.files["pyproject.toml"] == (tmp_path / "pkg" / "pyproject.toml").read_bytes()


@pytest.mark.docker
def test_push_to_a_local_registry_then_pull(local_registry: str, base_image: str) -> None:
    import io

    from rich.console import Console

    from openenv_provider_docker.build import build_image
    from openenv_provider_docker.engine import connect

    client = connect()
    # Built here (or found up to date), so the test never depends on another session's images.
    image = build_image(ROOT / "envs" / "echo", base_image=base_image, client=client,
                        console=Console(file=io.StringIO())).tag
    ref = f"{local_registry}/author-test-echo:t1"
    pushed = openenv("push", image, "--registry", ref, timeout=300)
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip() == ref
    assert f"pushed {ref} (sha256:" in pushed.stderr, pushed.stderr
    try:
        client.images.remove(ref)
        pulled = client.images.pull(f"{local_registry}/author-test-echo", tag="t1")
        assert pulled.id == client.images.get(image).id
    finally:
        client.images.remove(ref, force=True)
    refused = openenv("push", image, "--registry", "127.0.0.1:9/nothing:t1", timeout=120)
    try:
        assert refused.returncode == 1 and "could not push" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        client.images.remove("127.0.0.1:9/nothing:t1", force=True)  # the tag push made before failing


def _stub_workspace(root: Path) -> None:
    """A uv workspace shaped like this checkout (kernel, a transport, ``envs/*``), with stub members
    that have no dependencies, so ``uv lock`` runs offline where uv's cache holds the template's
    test dependencies."""
    for folder, dist in (("kernel", "openenvkit"), ("plugins/transport-ws", "openenvkit-transport-ws")):
        (root / folder).mkdir(parents=True)
        (root / folder / "pyproject.toml").write_text(
            f'[project]\nname = "{dist}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
            '[build-system]\nrequires = ["hatchling>=1.24"]\nbuild-backend = "hatchling.build"\n', encoding="utf-8")
    (root / "envs").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "ws-root"\nversion = "0"\nrequires-python = ">=3.11"\n[tool.uv]\npackage = false\n'
        '[tool.uv.workspace]\nmembers = ["kernel", "plugins/*", "envs/*"]\n', encoding="utf-8")


def test_init_inside_a_uv_workspace_keeps_the_workspace_working(tmp_path: Path) -> None:
    """`openenv init my_game --dir envs/my_game` in a checkout: uv must still resolve the workspace
    (it refuses a member depending on another member without a tool.uv.sources entry)."""
    import shutil

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    _stub_workspace(tmp_path)
    made = openenv("init", "my_game", "--dir", "envs/my_game", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "uv sync --all-packages" in made.stdout
    pyproject = (tmp_path / "envs" / "my_game" / "pyproject.toml").read_text(encoding="utf-8")
    assert "openenvkit = { workspace = true }" in pyproject
    assert "openenvkit-transport-ws = { workspace = true }" in pyproject
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    locked = subprocess.run([uv, "lock", "--offline"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env=env)
    if locked.returncode != 0 and "network was disabled" in locked.stderr:
        # The template's test extra (pytest) resolves from uv's cache when it holds the metadata;
        # a fresh cache may not (CI saw an old colorama page only), so ask the index.
        locked = subprocess.run([uv, "lock"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert locked.returncode == 0, locked.stderr
    # outside the members (and outside any workspace) nothing workspace-specific is written
    assert openenv("init", "other_game", "--dir", "elsewhere/other_game", cwd=tmp_path).returncode == 0
    assert "tool.uv.sources" not in (tmp_path / "elsewhere" / "other_game" / "pyproject.toml").read_text()
    assert openenv("init", "third_game", "--dir", str(tmp_path.parent / f"{tmp_path.name}-out")).returncode == 0
    assert "tool.uv.sources" not in (tmp_path.parent / f"{tmp_path.name}-out" / "pyproject.toml").read_text()
    shutil.rmtree(tmp_path.parent / f"{tmp_path.name}-out")
