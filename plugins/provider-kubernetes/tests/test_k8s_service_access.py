"""``access="service"`` on the real API server, without sending anything off the loopback.

Nothing here can route to a ClusterIP (no kube-proxy, no cluster DNS, and the tests' traffic
stays on 127.0.0.1), so what is checked is what the API shows: the handle's URL is the Service's
cluster DNS name and port, the Service selects exactly that Pod, and the Endpoints object (filled
by kube-controller-manager's endpoints controller) lists the Pod as a ready address on the server
port. While the launch runs, every name lookup of this process except the loopback's is refused
and recorded: service mode must not try to reach the URL from here.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_kubernetes.naming import SERVER_PORT
from openenv_provider_kubernetes.provider import KubernetesProvider

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow]

@pytest.fixture(autouse=True)
def _no_lookups(lookups: list[str]) -> list[str]:
    """Every test here runs with ``lookups`` on: none can send a query to the system's resolver."""
    return lookups


def _endpoint_addresses(endpoints: Any) -> tuple[list[tuple[str, str, int]], list[str]]:
    """(ready (pod, ip, port) triples, names of not-ready addresses) of an Endpoints object."""
    ready, not_ready = [], []
    for subset in endpoints.subsets or []:
        ports = [p.port for p in subset.ports or []]
        for address in subset.addresses or []:
            ready += [(address.target_ref.name, address.ip, port) for port in ports]
        not_ready += [a.target_ref.name for a in subset.not_ready_addresses or []]
    return ready, not_ready


def test_service_access_is_the_services_dns_url_and_its_ready_endpoint(
        provider: KubernetesProvider, kube: Any, echo_image: str, lookups: list[str]) -> None:
    started = time.monotonic()
    handle = provider.start(LaunchSpec(env="echo", token="svc-tok", startup_timeout_s=60,
                                       options={"access": "service"}))
    took = time.monotonic() - started
    try:
        assert lookups == [], f"service mode tried to reach its URL from outside the cluster: {lookups}"
        assert handle.forward is None  # no port-forward was opened
        url = urlsplit(handle.base_url)
        assert (url.scheme, url.hostname) == ("http", f"{handle.id}.{kube.namespace}.svc")
        service = kube.core.read_namespaced_service(handle.id, kube.namespace)
        (port,) = service.spec.ports
        assert (url.port, port.port, port.target_port, service.spec.type) == (
            port.port, SERVER_PORT, SERVER_PORT, "ClusterIP")
        # The selector matches exactly this Pod (asked of the API server, not recomputed here).
        selected = kube.core.list_namespaced_pod(kube.namespace, label_selector=",".join(
            f"{k}={v}" for k, v in service.spec.selector.items())).items
        assert [p.metadata.name for p in selected] == [handle.id]
        pod = selected[0]
        assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)
        # Ready when start() returned: the endpoints controller already listed the Pod.
        ready, not_ready = _endpoint_addresses(kube.core.read_namespaced_endpoints(handle.id, kube.namespace))
        assert ready == [(handle.id, pod.status.pod_ip, SERVER_PORT)] and not_ready == [], (ready, not_ready)
        assert handle.is_running()
        (info,) = [i for i in provider.ps() if i.id == handle.id]
        assert info.base_url == handle.base_url
    finally:
        handle.stop()
    assert took < 60
    assert kube.wait_no_leftovers() == []
    assert lookups == []


def test_service_access_without_a_service_is_refused_before_anything_is_made(
        provider: KubernetesProvider, kube: Any, lookups: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"access='service' needs the Service"):
        provider.start(LaunchSpec(env="echo", startup_timeout_s=30, options={"access": "service", "service": False}))
    assert kube.leftovers() == [] and lookups == []
