"""Every installed plugin keeps the contract of its kind.

The names come from the real plugin manager (entry points of the installed distributions), so a
newly installed env, transport or provider package is checked here without editing this file:

* every env: ``EnvContract`` (in-process, and served over the first client transport);
* every transport: ``TransportContract`` (server-only transports run the checks that need no client);
* providers: ``local`` and ``uv`` always, starting the ``echo`` env and playing one step;
  ``docker`` / ``swarm`` when an engine answers (``OPENENV_REQUIRE_DOCKER=1`` makes a missing
  engine a failure); a provider that declares ``requires`` (a cluster, credentials) is checked by
  its own tests where that is met; any other provider is built with no arguments and must start ``echo``.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from openenv.interfaces import LaunchSpec
from openenv.plugins import PluginManager
from openenv.testing import EnvContract, ProviderContract, TransportContract, play

try:  # the engine fixtures skip (or fail under OPENENV_REQUIRE_DOCKER=1) without an engine
    from openenv_provider_docker.fixtures import (  # noqa: F401 - fixtures
        docker_client,
        echo_dir,
        echo_image,
    )
except ImportError:  # pragma: no cover - the docker provider is not installed
    docker_client = None

#: The plugins installed in this environment, discovered once for parametrisation.
_INSTALLED = PluginManager(strict=True)
ENVS = _INSTALLED.catalog.envs.names()
TRANSPORTS = _INSTALLED.catalog.transports.names()
PROVIDERS = _INSTALLED.catalog.providers.names()
CONTAINER_PROVIDERS = {"docker", "swarm"}
STEP = {"message": "contract"}


def test_discovery_found_the_workspace_plugins() -> None:
    # The parametrised tests below would pass vacuously if discovery found nothing.
    assert {"echo", "grid_world", "echo_mcp"} <= set(ENVS)
    assert {"ws", "rest", "mcp"} <= set(TRANSPORTS)
    assert {"local", "uv"} <= set(PROVIDERS)


def _volatile_fields(name: str) -> list[str]:
    """The env manifest's ``volatile_fields`` (fields that may differ between equal-seed resets)."""
    from openenv.manifest import load_manifest, locate_manifest

    ref = _INSTALLED.catalog.envs.get(name).extra.get("manifest")
    return list(load_manifest(locate_manifest(ref)).volatile_fields) if ref else []


@pytest.mark.parametrize("name", ENVS)
def test_installed_env_keeps_the_env_contract(name: str) -> None:
    contract = EnvContract(_INSTALLED.catalog.envs.load(name), name=name, plugin_manager=_INSTALLED,
                           volatile_fields=_volatile_fields(name))
    ran = contract.run()
    assert "check_served" in ran, f"no client transport served {name}: {contract.skipped}"
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action"} <= set(ran)


@pytest.mark.parametrize("name", TRANSPORTS)
def test_installed_transport_keeps_the_transport_contract(name: str) -> None:
    contract = TransportContract(name, plugin_manager=_INSTALLED)
    ran = contract.run()
    expected = ["check_served", "check_round_trip", "check_bad_request", "check_capacity"]
    assert ran == (expected if contract.has_client else ["check_served"])


def _provider_case(name: str, request: pytest.FixtureRequest) -> tuple[Any, LaunchSpec]:
    cls = _INSTALLED.catalog.providers.load(name)
    if name in CONTAINER_PROVIDERS:
        if docker_client is None:
            pytest.skip(f"{name} needs openenv-provider-docker's test fixtures")
        client = request.getfixturevalue("docker_client")
        if name == "swarm":
            from openenv_provider_docker.testing import skip_unless_required, swarm_skip_reason

            reason = swarm_skip_reason(client)
            if reason:
                skip_unless_required(reason)
        from openenv_provider_docker.testing import echo_spec

        return cls(client), echo_spec(request.getfixturevalue("echo_image"))
    if getattr(cls, "requires", ""):
        pytest.skip(f"the {name} provider needs {cls.requires}")
    if name == "uv" and shutil.which("uv") is None:
        pytest.skip("the uv provider needs the uv executable")
    return cls(), LaunchSpec(env="echo", startup_timeout_s=180)


@pytest.mark.parametrize("name", [pytest.param(p, marks=pytest.mark.slow) if p != "local" else p
                                  for p in PROVIDERS])
def test_installed_provider_keeps_the_provider_contract(
        name: str, request: pytest.FixtureRequest, cli_env: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_STATE_DIR", cli_env["OPENENV_STATE_DIR"])
    monkeypatch.delenv("OPENENV_TOKEN", raising=False)
    provider, spec = _provider_case(name, request)
    ran = ProviderContract(provider, "echo", spec=spec, round_trip=play(STEP)).run()
    assert ran == ["check_lifecycle"]
