"""Fixtures for the kubernetes provider's tests on a real API server (``.ci/k8s-setup.sh``).

* ``kube`` (session) – the test cluster: the kubeconfig ``$OPENENV_K8S_KUBECONFIG`` (default
  ``/var/cache/openenv/k8s/kubeconfig``, written by the setup script), an API server that answers
  and a node that is ``Ready``. Without one the tests skip, or fail when
  ``OPENENV_REQUIRE_KUBERNETES=1`` (CI). A namespace of its own is created for the session
  (``KUBECONFIG``/``OPENENV_K8S_NAMESPACE`` point at it, for ``openenv run`` and child processes)
  and, at the end, the session fails if any Pod or Service is left in it; then it is deleted.
* ``provider`` – a ``KubernetesProvider`` on that namespace.
* ``echo_image`` – the echo env image built by ``openenv build`` (from the docker provider's fixtures;
  the node runs Pods on the same Docker engine).
* ``skip_or_fail`` – ``skip_or_fail(reason)``: skip, or fail when ``OPENENV_REQUIRE_KUBERNETES=1``.
  A real-cluster test missing part of the setup script's cluster goes through it, never
  ``pytest.skip`` (a fixture, not an import: see tests/conftest.py).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

try:  # the echo image is made by `openenv build` (the docker provider's command) on the node's engine
    from openenv_provider_docker.fixtures import docker_client, echo_dir, echo_image
except ImportError:  # this package tested alone (nox -s packages): the cluster tests skip
    docker_client = echo_dir = echo_image = None

DEFAULT_KUBECONFIG = "/var/cache/openenv/k8s/kubeconfig"


def _skip_or_fail(reason: str) -> NoReturn:
    if os.environ.get("OPENENV_REQUIRE_KUBERNETES", "").lower() in {"1", "true", "yes"}:
        pytest.fail(f"OPENENV_REQUIRE_KUBERNETES is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def skip_or_fail() -> Callable[[str], NoReturn]:
    return _skip_or_fail


@dataclass
class Kube:
    kubeconfig: str
    namespace: str
    core: Any

    def leftovers(self) -> list[str]:
        pods = [f"pod/{p.metadata.name}" for p in self.core.list_namespaced_pod(self.namespace).items]
        services = [f"service/{s.metadata.name}" for s in self.core.list_namespaced_service(self.namespace).items]
        return pods + services

    def wait_no_leftovers(self, timeout_s: float = 30.0) -> list[str]:
        deadline = time.monotonic() + timeout_s
        left = self.leftovers()
        while left and time.monotonic() < deadline:
            time.sleep(0.25)
            left = self.leftovers()
        return left


@pytest.fixture(scope="session")
def kube() -> Iterator[Kube]:
    from kubernetes import client, config

    path = os.environ.get("OPENENV_K8S_KUBECONFIG", DEFAULT_KUBECONFIG)
    if not Path(path).is_file():
        _skip_or_fail(f"no kubeconfig at {path}: run .ci/k8s-setup.sh (builds and starts a test cluster on "
                     "127.0.0.1) or set OPENENV_K8S_KUBECONFIG")
    api = config.new_client_from_config(config_file=path)
    api.configuration.retries = 0
    core = client.CoreV1Api(api)
    try:
        nodes = core.list_node(_request_timeout=5).items
    except Exception as exc:
        _skip_or_fail(f"the API server of {path} does not answer ({type(exc).__name__}: {exc}): run .ci/k8s-setup.sh")
    ready = [n.metadata.name for n in nodes
             if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])]
    if not ready:
        _skip_or_fail(f"the cluster of {path} has no Ready node: run .ci/k8s-setup.sh (it starts one)")
    namespace = f"openenv-test-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    # The ServiceAccount admission plugin refuses Pods until the namespace's default account exists.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(namespace).items):
            break
        time.sleep(0.2)
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "OPENENV_K8S_NAMESPACE")}
    os.environ["KUBECONFIG"] = path
    os.environ["OPENENV_K8S_NAMESPACE"] = namespace
    kube = Kube(kubeconfig=path, namespace=namespace, core=core)
    try:
        yield kube
        left = kube.wait_no_leftovers()
        assert not left, f"the kubernetes tests left objects behind in {namespace}: {left}"
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        core.delete_namespace(namespace, _request_timeout=10)
        api.close()


@pytest.fixture
def provider(kube: Kube) -> Iterator[Any]:
    from openenv_provider_kubernetes.provider import KubernetesProvider

    prov = KubernetesProvider(kubeconfig=kube.kubeconfig, namespace=kube.namespace)
    yield prov
    prov.close_pools()
