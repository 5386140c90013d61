"""Issue 32, upstream's provider API: ``ContainerProvider`` subclasses work as upstream documents.

The provider under test (fixtures/upstream_style_provider) is written against upstream's
contract only; it is used through ``from_docker_image(image, provider=...)``, ``EnvClient(base_url,
provider=...)``, and, adapted, as an ``openenv run --provider`` / ``openenv providers list`` entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from upstream_style_provider import FailingProvider, SubprocessProvider

from openenv.core import GenericEnvClient
from openenv.core.containers.adapter import adapted_provider, upstream_provider_refs
from openenv.core.containers.runtime import ContainerProvider, RuntimeProvider, UVProvider
from openenv.errors import PluginError
from openenv.interfaces import LaunchSpec

FIXTURES = Path(__file__).parent / "fixtures"


def test_contract_is_upstream_s() -> None:
    assert ContainerProvider.__abstractmethods__ == {"start_container", "stop_container", "wait_for_ready"}
    assert RuntimeProvider.__abstractmethods__ == {"start", "stop", "wait_for_ready"}
    with SubprocessProvider() as provider:  # the context manager closes the provider
        pass
    assert provider.closed


def test_from_docker_image_with_an_upstream_provider_instance() -> None:
    provider = SubprocessProvider()
    env = GenericEnvClient.from_docker_image("echo", provider=provider, env_vars={"X_TEST": "1"}).sync()
    try:
        assert env.reset().observation["echoed_message"] == "ready"
        assert env.step({"message": "hi"}).observation["echoed_message"] == "hi"
        assert provider.started_with["env_vars"] == {"X_TEST": "1"}
    finally:
        env.close()
    assert provider.proc is not None and provider.proc.poll() is not None  # close stopped the container


async def test_from_docker_image_awaited() -> None:
    provider = SubprocessProvider()
    env = await GenericEnvClient.from_docker_image("echo", provider=provider)
    try:
        assert (await env.step({"message": "a"})).observation["echoed_message"] == "a"
    finally:
        await env.close()
    assert provider.proc is not None and provider.proc.poll() is not None


def test_client_with_base_url_and_provider_stops_it_on_close() -> None:
    provider = SubprocessProvider()
    url = provider.start_container("echo")
    provider.wait_for_ready(url)
    with GenericEnvClient(base_url=url, provider=provider).sync() as env:
        assert env.step({"message": "b"}).observation["echoed_message"] == "b"
    assert provider.proc is not None and provider.proc.poll() is not None


def test_adapter_starts_and_stops_through_our_provider_interface() -> None:
    cls = adapted_provider("subproc", "upstream_style_provider:SubprocessProvider")
    provider = cls()
    handle = provider.start(LaunchSpec(env="echo"))
    try:
        assert [h.id for h in provider.ps()] == [handle.id]
        assert handle.base_url.startswith("http://127.0.0.1:")
    finally:
        handle.stop()
    assert provider.ps() == []


def test_a_provider_failing_to_import_or_start_is_one_clear_error() -> None:
    broken = adapted_provider("broken", "upstream_broken_provider:Provider", dist="openenv-broken")()
    with pytest.raises(PluginError, match=r"the package openenv-broken failed to import .*cloud_sdk"):
        broken.start(LaunchSpec(env="echo"))
    failing = adapted_provider("failing", "upstream_style_provider:FailingProvider")()
    with pytest.raises(RuntimeError, match=r"provider 'failing' .* failed to start 'echo': RuntimeError: "
                                           r"SPRITES_TOKEN is not set\. .*--provider"):
        failing.start(LaunchSpec(env="echo"))
    assert isinstance(FailingProvider(), ContainerProvider)


def test_env_var_registration_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDERS", "subproc=upstream_style_provider:SubprocessProvider")
    assert ("subproc", "upstream_style_provider:SubprocessProvider", None) in upstream_provider_refs()
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDERS", "oops")
    with pytest.raises(PluginError, match="name=module:Class"):
        upstream_provider_refs()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")]),
           "OPENENV_UPSTREAM_PROVIDERS": "subproc=upstream_style_provider:SubprocessProvider,"
                                         "broken=upstream_broken_provider:Provider"}
    return subprocess.run([sys.executable, "-m", "openenv", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def test_cli_lists_and_runs_an_upstream_provider() -> None:
    listed = _cli("providers", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    names = {row["name"] for row in json.loads(listed.stdout)["providers"]}
    assert {"subproc", "broken", "local"} <= names  # the broken one is listed; nothing was imported
    ran = _cli("run", "echo", "--provider", "subproc", "--episodes", "1", "--json")
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert json.loads(ran.stdout)["episodes"] == 1
    failed = _cli("run", "echo", "--provider", "broken", "--episodes", "1")
    assert failed.returncode != 0 and "the package upstream_broken_provider failed to import" in failed.stderr


def test_uv_provider_refuses_downloads_and_serves_an_installed_env() -> None:
    from openenv.core._unsupported import UnsupportedFeature

    with pytest.raises(UnsupportedFeature, match="Nothing is downloaded"):
        UVProvider("git+https://huggingface.co/spaces/openenv/echo_env")
    with UVProvider("echo") as runtime:
        runtime.wait_for_ready(10)
        with GenericEnvClient(base_url=runtime.base_url).sync() as env:
            assert env.step({"message": "c"}).observation["echoed_message"] == "c"


def test_constructor_options_and_images_come_from_the_kwargs_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = adapted_provider("subproc", "upstream_style_provider:SubprocessProvider")
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDER_KWARGS", '{"subproc": {"images": {"my-echo": "echo"}}}')
    handle = cls().start(LaunchSpec(env="my-echo"))  # the env name maps to the class's image "echo"
    try:
        assert SubprocessProvider.instances[-1].started_with["image"] == "echo"
    finally:
        handle.stop()
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDER_KWARGS", '{"subproc": {"region": "eu"}}')
    with pytest.raises(RuntimeError, match=r"provider 'subproc' .*could not be configured: TypeError: .*region.*"
                                           r"OPENENV_UPSTREAM_PROVIDER_KWARGS"):
        cls().start(LaunchSpec(env="echo"))
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDER_KWARGS", "{not json")
    with pytest.raises(PluginError, match=r"OPENENV_UPSTREAM_PROVIDER_KWARGS is not JSON .*\{\"subproc\""):
        cls().start(LaunchSpec(env="echo"))
    monkeypatch.setenv("OPENENV_UPSTREAM_PROVIDER_KWARGS", '{"subproc": ["eu"]}')
    with pytest.raises(PluginError, match="the entry for 'subproc' must be a JSON object"):
        cls().start(LaunchSpec(env="echo"))
