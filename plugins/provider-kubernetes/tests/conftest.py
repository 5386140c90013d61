"""Fixtures for the kubernetes provider's tests on a real API server (``.ci/k8s-setup.sh``).

* ``kube`` (session) – the test cluster: the kubeconfig ``$OPENENV_K8S_KUBECONFIG`` (default
  ``/var/cache/openenv/k8s/kubeconfig``, written by the setup script), an API server that answers
  and a node that is ``Ready``. Without one the tests skip, or fail when
  ``OPENENV_REQUIRE_KUBERNETES=1`` (CI). A namespace of its own is created for the session
  (``KUBECONFIG``/``OPENENV_K8S_NAMESPACE`` point at it, for ``openenv run`` and child processes)
  and, at the end, the session fails if any Pod, Service or owner Lease is left in it; then it is
  deleted.
* ``provider`` – a ``KubernetesProvider`` on that namespace.
* ``make_namespace`` – ``make_namespace(suffix)`` creates ``<session namespace>-<suffix>-<random>`` (ready for
  Pods: its default service account exists); at the end of the test it must hold no Pod, Service or
  owner Lease of ours, then it is deleted.
* ``echo_image`` – the echo env image built by ``openenv build`` (from the docker provider's fixtures;
  the node runs Pods on the same Docker engine).
* ``lookups`` – while it is on, every name lookup of this process other than the loopback's is
  refused (``socket.gaierror``) and recorded in the list it yields: for tests of Service URLs,
  which must never be resolved from here (nor sent to the system's resolver).
* ``skip_or_fail`` – ``skip_or_fail(reason)``: skip, or fail when ``OPENENV_REQUIRE_KUBERNETES=1``.
  A real-cluster test missing part of the setup script's cluster goes through it, never
  ``pytest.skip`` (a fixture, not an import: see tests/conftest.py).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

try:  # the echo image is made by `openenv build` (the docker provider's command) on the node's engine
    from openenv_provider_docker.fixtures import docker_client, echo_dir, echo_image
except ImportError:  # this package tested alone (nox -s packages): the tests needing the image skip
    _NO_DOCKER = "needs openenvkit-provider-docker (openenv build) installed too"

    @pytest.fixture(scope="session")
    def docker_client() -> Any:
        pytest.skip(_NO_DOCKER)

    @pytest.fixture(scope="session")
    def echo_dir() -> Any:
        pytest.skip(_NO_DOCKER)

    @pytest.fixture(scope="session")
    def echo_image() -> Any:
        pytest.skip(_NO_DOCKER)

#: Fixtures that come from the docker provider (above): a test using one needs that package too.
DOCKER_FIXTURES = frozenset({"docker_client", "echo_dir", "echo_image"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Declared here once instead of on every test: `nox -s integration` selects package tests by the
    # requires_plugins marker, and these skip without the docker provider (nox -s packages).
    # (This hook sees every collected item, also other packages' in one run: only ours are marked.)
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and DOCKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.requires_plugins("provider-docker"))


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

    def leftovers(self, namespace: str | None = None) -> list[str]:
        """Pods, Services and (the provider's owner) Leases in ``namespace`` (the session's)."""
        from kubernetes import client

        ns = namespace or self.namespace
        pods = [f"pod/{p.metadata.name}" for p in self.core.list_namespaced_pod(ns).items]
        services = [f"service/{s.metadata.name}" for s in self.core.list_namespaced_service(ns).items]
        leases = client.CoordinationV1Api(self.core.api_client).list_namespaced_lease(
            ns, label_selector="openenv.org/managed=true").items
        return pods + services + [f"lease/{lease.metadata.name}" for lease in leases]

    def wait_no_leftovers(self, timeout_s: float = 90.0, namespace: str | None = None) -> list[str]:
        # Bounded, and long: a Pod's deletion (grace period, kubelet on a busy node) can take a minute.
        deadline = time.monotonic() + timeout_s
        left = self.leftovers(namespace)
        while left and time.monotonic() < deadline:
            time.sleep(0.25)
            left = self.leftovers(namespace)
        return left

    def create_namespace(self, name: str) -> str:
        """Create ``name`` with its default service account, which Pods need (``create_ready_namespace``)."""
        from openenv_provider_kubernetes.testing import create_ready_namespace

        return create_ready_namespace(self.core, name)


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
    kube = Kube(kubeconfig=path, namespace=namespace, core=core)
    kube.create_namespace(namespace)
    saved = {k: os.environ.get(k) for k in ("KUBECONFIG", "OPENENV_K8S_NAMESPACE")}
    os.environ["KUBECONFIG"] = path
    os.environ["OPENENV_K8S_NAMESPACE"] = namespace
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


@pytest.fixture
def make_namespace(kube: Kube) -> Iterator[Callable[[str], str]]:
    made: list[str] = []

    def make(suffix: str) -> str:
        made.append(kube.create_namespace(f"{kube.namespace}-{suffix}-{uuid.uuid4().hex[:4]}"))
        return made[-1]

    yield make
    try:
        left = {ns: kube.wait_no_leftovers(namespace=ns) for ns in made}
        assert not any(left.values()), f"a test left objects behind: {left}"
    finally:
        for ns in made:
            kube.core.delete_namespace(ns, _request_timeout=10)


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    tried: list[str] = []
    real = socket.getaddrinfo

    def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name not in {"127.0.0.1", "localhost", "::1"}:
            tried.append(name)
            raise socket.gaierror(socket.EAI_NONAME, f"the test refuses to resolve {name} (loopback only)")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", guarded)
    yield tried
