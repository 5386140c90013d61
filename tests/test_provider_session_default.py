"""Every provider leaves the session bound to the server unless ``LaunchSpec.max_sessions`` is given.

``LaunchSpec(max_sessions=None)`` (the default) means no ``--max-sessions``, so ``openenv serve``
applies its rule (many sessions for a concurrency-safe env, 1 for any other); an explicit value
still reaches the server. The local provider's end-to-end check is in its own tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from openenv.interfaces import LaunchSpec


def _local(spec: LaunchSpec) -> list[str]:
    from openenv_provider_local.local import LocalProvider

    return LocalProvider().serve_args(spec, Path("ready"))


def _uv(spec: LaunchSpec) -> list[str]:
    from openenv_provider_local.uv import UvProvider

    return UvProvider().serve_args(spec, Path("ready"))


def _docker(spec: LaunchSpec) -> list[str]:
    from openenv_provider_docker.images import ResolvedImage, server_command

    image = ResolvedImage(ref="openenv-echo:1", id="sha256:1", env="echo", derived=True,
                          cmd=("python", "-m", "openenv", "serve", "echo"), serves_openenv=True,
                          read_only_ok=True)
    return server_command(image, spec) or []


def _kubernetes(spec: LaunchSpec) -> list[str]:
    from openenv_provider_kubernetes.manifests import ServerImage, server_args
    from openenv_provider_kubernetes.options import parse_options

    return server_args(ServerImage(ref="openenv-echo:1", env="echo", built=True), spec,
                       parse_options({})) or []


def _ray(spec: LaunchSpec) -> list[str]:
    from openenv_provider_ray.options import parse_options

    value = parse_options(spec, None).server["max_sessions"]
    return [] if value is None else ["--max-sessions", str(value)]


def _aca(spec: LaunchSpec) -> list[str]:
    from openenv_provider_aca.provider import AcaProvider

    return AcaProvider().command(spec).split()


def _daytona(spec: LaunchSpec) -> list[str]:
    from openenv_provider_daytona.provider import DaytonaProvider

    return DaytonaProvider().command(spec).split()


def _e2b(spec: LaunchSpec) -> list[str]:
    from openenv_provider_e2b.provider import E2BProvider

    return E2BProvider().command(spec).split()


def _novita(spec: LaunchSpec) -> list[str]:
    from openenv_provider_novita.provider import NovitaProvider

    return NovitaProvider().command(spec).split()


def _hf_sandbox(spec: LaunchSpec) -> list[str]:
    from openenv_provider_hf_sandbox.provider import HFSandboxProvider

    return HFSandboxProvider().command(spec).split()


def _modal(spec: LaunchSpec) -> list[str]:
    from openenv_provider_modal.provider import ModalProvider

    return ModalProvider().command(spec)


SERVER_ARGS: dict[str, Callable[[LaunchSpec], list[str]]] = {
    "local": _local, "uv": _uv, "docker": _docker, "kubernetes": _kubernetes, "ray": _ray,
    "aca": _aca, "daytona": _daytona, "e2b": _e2b, "modal": _modal,
    "novita": _novita, "hf_sandbox": _hf_sandbox,
}


@pytest.mark.parametrize("provider", sorted(SERVER_ARGS))
def test_default_spec_passes_no_session_bound(provider: str) -> None:
    assert LaunchSpec(env="echo").max_sessions is None
    assert "--max-sessions" not in SERVER_ARGS[provider](LaunchSpec(env="echo"))


@pytest.mark.parametrize("provider", sorted(SERVER_ARGS))
def test_explicit_session_bound_reaches_the_server(provider: str) -> None:
    args = SERVER_ARGS[provider](LaunchSpec(env="echo", max_sessions=3))
    assert args[args.index("--max-sessions") + 1] == "3"
