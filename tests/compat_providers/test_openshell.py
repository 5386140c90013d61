"""Issue 32: the real ``openenv-openshell`` package from the index, unchanged, as our provider.

Its cloud is replaced by ``openshell_standin`` at the ``openshell`` SDK's network boundary: a gRPC
gateway on 127.0.0.1 (mutual TLS, the SDK's own generated service), registered where the SDK's
``SandboxClient.from_active_cluster`` looks for it (``$XDG_CONFIG_HOME/openshell/gateways``).
Everything between ``openenv run`` and that gateway is the package's own code: ``OpenShellProvider``
checks the gateway's version, creates a sandbox with a service exposure, polls it ready, polls the
service's ``/health``, and on stop checks the sandbox's identity, deletes it and waits for it gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openenv_openshell", reason="openenv-openshell is installed only by `nox -s upstream_providers`")
pytest.importorskip("openshell", reason="the openshell SDK is installed only by `nox -s upstream_providers`")

from openshell_standin import OpenShellStandin

from openenv.core import GenericEnvClient

GATEWAY = "standin"
PORT = 8000  # the sandbox's (virtual) service port; the stand-in maps it to a free loopback port


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenShellStandin]:
    config_home = tmp_path / "config"
    with OpenShellStandin(tmp_path / "gateway") as standin:
        standin.register_gateway(config_home, GATEWAY)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
        monkeypatch.delenv("OPENSHELL_GATEWAY", raising=False)
        yield standin
        assert standin.live_processes() == [], "a sandbox process outlived the test"


def _provider_kwargs(**overrides: Any) -> dict[str, Any]:
    return {
        "gateway": GATEWAY,
        # OpenShell 0.1.2 requires the sandbox's argv: the env server on the exposed port.
        "command": [sys.executable, "-m", "openenv", "serve", "echo", "--host", "127.0.0.1", "--port", str(PORT)],
        "service_port": PORT,
        # The package deletes its sandbox on stop only with this acknowledgement (its "restricted alpha").
        "restricted_alpha_cleanup_acknowledged": True,
        "health_poll_interval_s": 0.2,
        **overrides,
    }


def _cli(*args: str, kwargs: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "OPENENV_UPSTREAM_PROVIDER_KWARGS"}
    if kwargs is not None:
        env["OPENENV_UPSTREAM_PROVIDER_KWARGS"] = json.dumps({"openshell": kwargs})
    return subprocess.run([sys.executable, "-m", "openenv", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def test_listed_without_importing_it() -> None:
    listed = _cli("providers", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)["providers"]}
    assert "openenv_openshell:OpenShellProvider" in rows["openshell"]["description"]


@pytest.mark.slow_ok("two interpreters start (the CLI and the sandbox's `openenv serve`) and the SDK "
                    "polls readiness and deletion once a second; ~15 s alone, over 60 s on 2 busy cores")
def test_openenv_run_drives_echo_through_openshell(gateway: OpenShellStandin) -> None:
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "2", "--json", kwargs=_provider_kwargs())
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert json.loads(ran.stdout)["episodes"] == 2
    # The package's whole flow went through the gateway, and it deleted what it created.
    assert gateway.calls[:2] == ["Health", "CreateSandbox"] and "DeleteSandbox" in gateway.calls
    assert len(gateway.started) == 1 and len(gateway.deleted) == 1 and gateway.sandboxes == {}
    assert gateway.live_processes() == []


@pytest.mark.slow_ok("the sandbox's `openenv serve` starts and the SDK polls readiness and deletion once a "
                    "second; ~11 s alone, over 60 s on 2 busy cores")
def test_from_docker_image_with_an_openshell_provider_instance(gateway: OpenShellStandin) -> None:
    from openenv_openshell import OpenShellProvider

    provider = OpenShellProvider(**_provider_kwargs())
    env = GenericEnvClient.from_docker_image("ghcr.io/example/echo-env:latest", provider=provider).sync()
    try:
        assert env.step({"message": "via openshell"}).observation["echoed_message"] == "via openshell"
        (sandbox,) = gateway.sandboxes.values()
        assert sandbox.name.startswith("openenv-echo")
        assert sandbox.labels["managed-by"] == "openenv-openshell"
    finally:
        env.close()
    assert gateway.sandboxes == {} and len(gateway.deleted) == 1
    assert provider.state.deleted and gateway.live_processes() == []


def test_a_missing_configuration_is_one_line() -> None:
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1")
    assert ran.returncode != 0
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, ran.stderr
    assert "provider 'openshell' (openenv-openshell)" in lines[0] and "--provider" in lines[0]


def test_a_gateway_of_another_version_is_refused_and_leaves_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenShellStandin(tmp_path / "gateway", version="0.2.0") as standin:
        standin.register_gateway(tmp_path / "config", GATEWAY)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1", kwargs=_provider_kwargs())
        assert ran.returncode != 0
        assert "provider 'openshell' (openenv-openshell) failed to start" in ran.stderr
        assert "0.1.2" in ran.stderr and standin.started == [] and standin.sandboxes == {}


def test_an_unknown_gateway_name_is_one_clear_error(gateway: OpenShellStandin) -> None:
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1",
               kwargs=_provider_kwargs(gateway="no-such-gateway"))
    assert ran.returncode != 0
    assert "provider 'openshell' (openenv-openshell) failed to start" in ran.stderr
    assert gateway.started == []


def test_a_client_without_its_certificate_is_refused(gateway: OpenShellStandin, tmp_path: Path) -> None:
    # The gateway requires a client certificate (mutual TLS): with only the CA, the SDK cannot connect.
    mtls = tmp_path / "config" / "openshell" / "gateways" / GATEWAY / "mtls"
    (mtls / "tls.crt").unlink()
    (mtls / "tls.key").unlink()
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1", kwargs=_provider_kwargs())
    assert ran.returncode != 0
    assert "failed to start" in ran.stderr and "OpenShellConnectionError" in ran.stderr
    assert gateway.calls == [] and gateway.started == []


def test_a_sandbox_whose_server_dies_is_deleted(gateway: OpenShellStandin) -> None:
    kwargs = _provider_kwargs(command=[sys.executable, "-c", "raise SystemExit(3)"])
    ran = _cli("run", "echo", "--provider", "openshell", "--episodes", "1", kwargs=kwargs)
    assert ran.returncode != 0
    assert "provider 'openshell' (openenv-openshell) failed to start" in ran.stderr
    assert "SandboxReadinessError" in ran.stderr
    assert len(gateway.started) == 1 and len(gateway.deleted) == 1 and gateway.sandboxes == {}
