"""What an env declaring ``sandbox:`` gets from the docker provider, without an engine: the labels
``openenv build`` writes from the manifest, the container's user and capabilities, and the runtime
choice. An engine with gVisor registered cannot be had here, so for the runtime choice the Docker
SDK talks to a tiny HTTP server on 127.0.0.1 that answers ``GET /info`` as such an engine would."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.manifest import ManifestError
from openenv_provider_docker.context import dockerfile, read_env_package
from openenv_provider_docker.images import ResolvedImage
from openenv_provider_docker.naming import LABEL_SANDBOX_DROP, LABEL_SANDBOX_GVISOR
from openenv_provider_docker.options import parse_options
from openenv_provider_docker.sandboxing import GVISOR_PIDS_LIMIT, SANDBOX_CAPS, identity, pids_limit, runtime

ENVS = Path(__file__).resolve().parents[3] / "envs"


def _image(drop: bool = False, gvisor: str | None = None) -> ResolvedImage:
    return ResolvedImage(ref="openenv-x:1", id="sha256:x", env="x", derived=True, cmd=None, serves_openenv=True,
                         read_only_ok=True, sandbox_drop_privileges=drop, sandbox_gvisor=gvisor)


def _package(tmp_path: Path, manifest: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x-env"\nversion = "1.0"\n[project.entry-points.openenv]\nx = "x.plugin"\n')
    (tmp_path / "openenv.yaml").write_text(manifest)
    return tmp_path


def test_the_manifests_sandbox_becomes_image_labels(tmp_path: Path) -> None:
    pkg = read_env_package(_package(tmp_path, "name: x\nsandbox:\n  drop_privileges: true\n"))
    assert pkg.sandbox == {"drop_privileges": True, "gvisor": "auto"}
    text = dockerfile(pkg, base_image="b", python="python3", python_version="3.11")
    assert f'{LABEL_SANDBOX_DROP}="true"' in text and f'{LABEL_SANDBOX_GVISOR}="auto"' in text
    plain = read_env_package(_package(tmp_path, "name: x\n"))
    assert plain.sandbox is None
    assert "org.openenv.sandbox" not in dockerfile(plain, base_image="b", python="python3", python_version="3.11")


def test_a_misspelt_sandbox_key_is_refused_at_build_time(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"'sandbox\.drop_privilege'.*Extra inputs are not permitted"):
        read_env_package(_package(tmp_path, "name: x\nsandbox:\n  drop_privilege: true\n"))


@pytest.mark.parametrize("env", ["coding", "shell"])
def test_the_code_envs_ask_for_it(env: str) -> None:
    assert read_env_package(ENVS / env).sandbox == {"drop_privileges": True, "gvisor": "auto"}


def test_only_an_env_that_asks_runs_as_root_and_only_with_the_sandboxs_capabilities() -> None:
    opts = parse_options({}, provider="docker")
    assert identity(_image(), opts) == (None, ())
    assert identity(_image(drop=True), opts) == ("0:0", SANDBOX_CAPS) == ("0:0", ("SETUID", "SETGID", "CHOWN"))
    extra = parse_options({"cap_add": ["NET_BIND_SERVICE", "CHOWN"]}, provider="docker")
    assert identity(_image(drop=True), extra) == ("0:0", ("SETUID", "SETGID", "CHOWN", "NET_BIND_SERVICE"))
    # An explicit user wins: nothing is added (and the env's /metadata says privileges are not dropped).
    mine = parse_options({"user": "10001:10001"}, provider="docker")
    assert identity(_image(drop=True), mine) == ("10001:10001", ())


class _Engine(BaseHTTPRequestHandler):
    runtimes: dict[str, Any] = {}

    def do_GET(self) -> None:
        body = json.dumps({"Runtimes": self.runtimes, "DefaultRuntime": "runc"}).encode()
        self.send_response(200 if self.path.endswith("/info") else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def engine() -> Iterator[Any]:
    """A Docker SDK client whose engine answers ``/info`` from ``_Engine.runtimes``."""
    import docker

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Engine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = docker.DockerClient(base_url=f"tcp://127.0.0.1:{server.server_address[1]}", version="1.41", timeout=5)
    try:
        yield client
    finally:
        client.close()
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_gvisor_is_used_where_the_engine_has_it(engine: Any) -> None:
    opts = parse_options({}, provider="docker")
    _Engine.runtimes = {"runc": {"path": "runc"}, "runsc": {"path": "/usr/bin/runsc"}}
    assert runtime(engine, _image(drop=True, gvisor="auto"), opts) == "runsc"
    assert runtime(engine, _image(drop=True, gvisor="required"), opts) == "runsc"
    assert runtime(engine, _image(drop=True, gvisor="off"), opts) is None
    assert runtime(engine, _image(), opts) is None  # an env that declares no sandbox: the engine's default
    forced = parse_options({"runtime": "default"}, provider="docker")
    assert runtime(engine, _image(drop=True, gvisor="auto"), forced) is None


def test_without_gvisor_auto_runs_on_the_default_and_required_says_how_to_get_it(engine: Any) -> None:
    opts = parse_options({}, provider="docker")
    _Engine.runtimes = {"runc": {"path": "runc"}}
    assert runtime(engine, _image(drop=True, gvisor="auto"), opts) is None
    with pytest.raises(ConfigError, match=r"requires gVisor.*apt-get install runsc.*--add-runtime runsc=/usr/bin/"):
        runtime(engine, _image(drop=True, gvisor="required"), opts)
    with pytest.raises(ConfigError, match=r"'runsc': this engine has no such runtime \(it has runc\)"):
        runtime(engine, _image(), parse_options({"runtime": "runsc"}, provider="docker"))


def test_under_gvisor_the_pids_limit_leaves_room_for_gvisors_own_threads() -> None:
    opts = parse_options({}, provider="docker")
    assert pids_limit(None, opts, explicit=False) == pids_limit("runc", opts, explicit=False) == 256
    assert pids_limit("runsc", opts, explicit=False) == GVISOR_PIDS_LIMIT == 4096
    mine = parse_options({"pids_limit": 512}, provider="docker")
    assert pids_limit("runsc", mine, explicit=True) == 512


def test_the_runtime_option_is_checked() -> None:
    assert parse_options({"runtime": "runsc"}, provider="docker").runtime == "runsc"
    with pytest.raises(ConfigError, match="expected the name of a runtime"):
        parse_options({"runtime": "../x"}, provider="docker")
    with pytest.raises(ConfigError, match="Unknown option"):
        parse_options({"runtime": "runsc"}, provider="swarm", swarm=True)  # Swarm cannot choose one
