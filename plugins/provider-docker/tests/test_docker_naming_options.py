"""The shared tag convention, labels, and option validation (no engine needed)."""

from __future__ import annotations

import pytest

from openenv.errors import ConfigError
from openenv_provider_docker.naming import (
    LABEL_MANAGED,
    LABEL_OWNER,
    image_tag,
    is_image_reference,
    label_filters,
    managed_labels,
    owner_network_name,
    resource_name,
)
from openenv_provider_docker.options import parse_memory, parse_options


def test_image_tag_convention() -> None:
    assert image_tag("echo", "0.1.0") == "openenv-echo:0.1.0"
    assert image_tag("echo") == "openenv-echo:latest"
    # Docker refuses upper case in repositories and '+' in tags: both are mapped, not rejected.
    assert image_tag("Grid World", "1.0+local") == "openenv-grid-world:1.0-local"
    assert image_tag("echo_async", "2") == "openenv-echo_async:2"


def test_env_names_and_image_references_are_told_apart() -> None:
    assert not is_image_reference("echo")
    for ref in ("openenv-echo:0.1.0", "ghcr.io/x/echo", "echo@sha256:abc"):
        assert is_image_reference(ref)


def test_managed_labels_cannot_be_overridden_by_extra_labels() -> None:
    labels = managed_labels(provider="docker", owner="h:1:2", env="echo",
                            extra={LABEL_OWNER: "someone-else", "team": "rl"})
    assert labels[LABEL_OWNER] == "h:1:2"
    assert labels[LABEL_MANAGED] == "true"
    assert labels["team"] == "rl"
    assert label_filters("docker", "h:1:2") == [
        "org.openenv.managed=true", "org.openenv.provider=docker", "org.openenv.owner=h:1:2"]


def test_resource_and_network_names_use_dockers_alphabet() -> None:
    name = owner_network_name("docker", "host.example:123:456")
    assert name.startswith("openenv-docker-") and ":" not in name
    assert owner_network_name("docker", "a:1:2") != owner_network_name("docker", "a:1:3")
    assert len(resource_name("x" * 100, "abc")) <= 63


def test_hardened_defaults() -> None:
    opts = parse_options({}, provider="docker")
    assert opts.memory_bytes == 512 * 1024**2
    assert opts.nano_cpus == 1_000_000_000
    assert opts.pids_limit == 256
    assert opts.network == "isolated"
    assert opts.read_only is None  # decided by the image's label, default read-only
    assert opts.cap_add == ()
    assert opts.init is True
    assert opts.nofile == 8192
    assert opts.nproc is None  # Docker: the engine's own; Podman: PODMAN_NPROC (see the provider)
    with pytest.raises(ConfigError, match="Unknown option"):
        parse_options({"nofile": 100}, provider="swarm", swarm=True)  # docker only


def test_nproc_option() -> None:
    assert parse_options({"nproc": "4096"}, provider="docker").nproc == 4096
    with pytest.raises(ConfigError, match="nproc"):
        parse_options({"nproc": 10}, provider="docker")  # below the minimum
    with pytest.raises(ConfigError, match="Unknown option"):
        parse_options({"nproc": 4096}, provider="swarm", swarm=True)  # docker only


def test_options_are_parsed() -> None:
    opts = parse_options({"memory": "2g", "cpus": "0.5", "pids_limit": 64, "read_only": "false",
                          "network": "bridge", "cap_add": ["net_bind_service"], "pull": "missing",
                          "labels": {"a": 1}}, provider="docker")
    assert opts.memory_bytes == 2 * 1024**3
    assert opts.nano_cpus == 500_000_000
    assert opts.pids_limit == 64
    assert opts.read_only is False
    assert opts.network == "bridge"
    assert opts.cap_add == ("NET_BIND_SERVICE",)
    assert opts.labels == {"a": "1"}


@pytest.mark.parametrize(("options", "needle"), [
    ({"memroy": "1g"}, "Did you mean 'memory'?"),
    ({"replicas": 2}, "Unknown option"),  # Swarm-only option on the docker provider
    ({"memory": "lots"}, "is not a size"),
    ({"memory": "1m"}, "too small"),
    ({"cpus": 0}, "at least 0.01"),
    ({"cpus": True}, "expected a number"),
    ({"pids_limit": 2.5}, "an integer"),
    ({"network": "none"}, "cannot publish"),
    ({"network": "host"}, "no isolation"),
    ({"cap_add": ["ALL"]}, "may not give back ALL"),
    ({"cap_add": "rm -rf"}, "capability names"),
    ({"read_only": "maybe"}, "true or false"),
    ({"pull": "sometimes"}, "never, missing, always"),
    ({"labels": ["a"]}, "mapping"),
])
def test_bad_options_are_refused_with_the_fix(options: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_options(options, provider="docker")
    assert needle in str(err.value)


def test_swarm_options() -> None:
    opts = parse_options({"replicas": 3, "published_port": 18000}, provider="swarm", swarm=True)
    assert (opts.replicas, opts.published_port) == (3, 18000)
    with pytest.raises(ConfigError, match="at most 65535"):
        parse_options({"published_port": 70000}, provider="swarm", swarm=True)
    with pytest.raises(ConfigError, match="at least 1"):
        parse_options({"replicas": 0}, provider="swarm", swarm=True)


def test_parse_memory_units() -> None:
    assert parse_memory("64m") == 64 * 1024**2
    assert parse_memory("1.5g") == int(1.5 * 1024**3)
    assert parse_memory(10 * 1024**2) == 10 * 1024**2
    assert parse_memory("512MiB") == 512 * 1024**2
