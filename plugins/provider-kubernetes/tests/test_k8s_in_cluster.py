"""In-cluster configuration on the real API server, with a real service-account token.

Outside a Pod this emulates exactly what a Pod sees: ``KUBERNETES_SERVICE_HOST``/``_PORT`` (the
API server on 127.0.0.1), and a service-account directory (``$OPENENV_K8S_SERVICEACCOUNT_DIR``)
holding a token the API server issued through the TokenRequest API for a ServiceAccount of a test
namespace, the ``ca.crt`` the token controller put into that account's Secret, and the
``namespace`` file. The account is bound to a Role holding exactly ``REQUIRED_RULES``; no
kubeconfig is in sight.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_kubernetes.cluster import REQUIRED_RULES, AccessDenied
from openenv_provider_kubernetes.provider import KubernetesProvider

_docker_testing = pytest.importorskip("openenv_provider_docker.testing",
                                      reason="needs openenvkit-provider-docker (openenv build) installed too")
raw_episode = _docker_testing.raw_episode

# The module-level import above skips this file where the docker provider is missing (nox -s packages);
# the marker selects it in `nox -s integration`.
pytestmark = [pytest.mark.kubernetes, pytest.mark.slow, pytest.mark.requires_plugins("provider-docker")]

ACCOUNT = "openenv-trainer"
ROLE = "openenv-provider"


def _role_rules(rules: Any = REQUIRED_RULES) -> list[dict[str, Any]]:
    return [{"apiGroups": [group], "resources": [resource], "verbs": list(verbs)} for group, resource, verbs in rules]


@dataclass
class Pod:
    """What a Pod of ServiceAccount ``ACCOUNT`` in ``namespace`` would see."""

    namespace: str
    directory: Path
    token: str
    user: str


def _sa_client(token: str, host: str, ca: Path) -> Any:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = host
    configuration.ssl_ca_cert = str(ca)
    configuration.api_key = {"BearerToken": f"Bearer {token}"}
    return client.ApiClient(configuration)


def _wait_authorized(pod: Pod, host: str, rules: Any, *, allowed: bool) -> None:
    """Until the RBAC authorizer (an informer, so not instantly) agrees with the Role for every
    ``rules`` verb: each request is answered ``allowed`` (asked as the account itself)."""
    from kubernetes import client

    api = _sa_client(pod.token, host, pod.directory / "ca.crt")
    try:
        authz = client.AuthorizationV1Api(api)
        deadline = time.monotonic() + 30
        for group, resource, verbs in rules:
            base, _, sub = resource.partition("/")
            for verb in verbs:
                attrs = {"namespace": pod.namespace, "group": group, "resource": base, "verb": verb,
                         **({"subresource": sub} if sub else {})}
                while authz.create_self_subject_access_review(
                        {"spec": {"resourceAttributes": attrs}}).status.allowed is not allowed:
                    assert time.monotonic() < deadline, f"RBAC never said allowed={allowed} for {attrs}"
                    time.sleep(0.1)
    finally:
        api.close()


@pytest.fixture
def pod(kube: Any, make_namespace: Callable[[str], str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Pod:
    from kubernetes import client

    namespace = make_namespace("sa")
    core, rbac = kube.core, client.RbacAuthorizationV1Api(kube.core.api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": ACCOUNT}})
    rbac.create_namespaced_role(namespace, {"metadata": {"name": ROLE}, "rules": _role_rules()})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}]})
    # A bound token from the TokenRequest API (what a projected service-account volume holds).
    request = core.create_namespaced_service_account_token(ACCOUNT, namespace, {"spec": {"expirationSeconds": 3600}})
    # ca.crt as a Pod gets it: what the token controller (--root-ca-file) put into the account's Secret.
    deadline = time.monotonic() + 30
    secrets: list[Any] = []
    while not secrets:
        assert time.monotonic() < deadline, "the token controller never made the account's Secret"
        secrets = [s for s in core.list_namespaced_secret(namespace).items
                   if s.type == "kubernetes.io/service-account-token"
                   and (s.metadata.annotations or {}).get("kubernetes.io/service-account.name") == ACCOUNT
                   and (s.data or {}).get("ca.crt")]
        time.sleep(0.1)
    directory = tmp_path / "serviceaccount"
    directory.mkdir()
    (directory / "token").write_text(request.status.token)
    (directory / "ca.crt").write_bytes(base64.b64decode(secrets[0].data["ca.crt"]))
    (directory / "namespace").write_text(namespace)
    server = urlsplit(core.api_client.configuration.host)
    assert server.hostname == "127.0.0.1", server
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setenv("OPENENV_K8S_SERVICEACCOUNT_DIR", str(directory))
    for name in ("KUBECONFIG", "OPENENV_K8S_NAMESPACE", "OPENENV_K8S_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    result = Pod(namespace=namespace, directory=directory, token=request.status.token,
                 user=f"system:serviceaccount:{namespace}:{ACCOUNT}")
    _wait_authorized(result, core.api_client.configuration.host, REQUIRED_RULES, allowed=True)
    return result


def test_in_cluster_config_launches_plays_and_cleans_up(kube: Any, pod: Pod, echo_image: str) -> None:
    provider = KubernetesProvider()  # nothing named: KUBERNETES_SERVICE_HOST makes it in-cluster
    cluster = provider.cluster()
    assert cluster.in_cluster and cluster.namespace == pod.namespace
    configuration = cluster.api_client.configuration
    assert configuration.host == kube.core.api_client.configuration.host
    assert configuration.api_key["BearerToken"] == f"bearer {pod.token}" and not configuration.cert_file
    # In-cluster defaults to the Service URL; from outside a Pod only the port-forward reaches it.
    handle = provider.start(LaunchSpec(env="echo", token="sa-tok", startup_timeout_s=120,
                                       options={"access": "port-forward"}))
    try:
        assert handle.namespace == pod.namespace and handle.base_url.startswith("http://127.0.0.1:")
        assert kube.core.read_namespaced_pod(handle.id, pod.namespace).status.phase == "Running"
        replies = raw_episode(handle.base_url, token="sa-tok")  # through pods/portforward, as the account
        assert [r["type"] for r in replies] == ["observation", "observation", "state"]
        assert [i.id for i in provider.ps()] == [handle.id]
        assert provider.gc() == []  # the account may list everything gc looks at; the live owner is kept
    finally:
        handle.stop()
    assert kube.wait_no_leftovers(namespace=pod.namespace) == []
    assert provider.ps(all_owners=True) == []


def test_in_cluster_without_the_files_names_the_directory(pod: Pod, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("OPENENV_K8S_SERVICEACCOUNT_DIR", str(empty))
    with pytest.raises(ConfigError) as info:
        KubernetesProvider().cluster()
    text = str(info.value)
    assert str(empty / "token") in text and "OPENENV_K8S_SERVICEACCOUNT_DIR" in text, text
    # The option wins over the variable.
    cluster = KubernetesProvider(in_cluster=True).cluster(
        KubernetesProvider(in_cluster=True).options(LaunchSpec(env="echo", options={
            "serviceaccount_dir": str(pod.directory)})))
    assert cluster.in_cluster and cluster.namespace == pod.namespace


def test_in_cluster_default_access_is_the_service(kube: Any, pod: Pod, echo_image: str,
                                                  lookups: list[str]) -> None:
    """No access option: in-cluster means the Service URL, ready once its Endpoints list the Pod
    (read with the account's own rights), and the URL is never resolved from here."""
    provider = KubernetesProvider()
    handle = provider.start(LaunchSpec(env="echo", startup_timeout_s=120))
    try:
        assert handle.base_url == f"http://{handle.id}.{pod.namespace}.svc:8000" and handle.forward is None
        endpoints = kube.core.read_namespaced_endpoints(handle.id, pod.namespace)
        assert [a.target_ref.name for s in endpoints.subsets for a in s.addresses] == [handle.id]
    finally:
        handle.stop()
    assert lookups == []
    assert kube.wait_no_leftovers(namespace=pod.namespace) == []


#: (rule removed from the Role, the verb start() is then refused, access) for each rule start() needs.
_NEEDED_BY_START = ("leases", "pods", "services", "pods/portforward", "endpoints")
_START_RULES = [(rule, rule[2][0], "service" if rule[1] == "endpoints" else "port-forward")
                for rule in REQUIRED_RULES if rule[1] in _NEEDED_BY_START]


@pytest.mark.parametrize(("rule", "verb", "access"), _START_RULES, ids=[r[1] for r, _, _ in _START_RULES])
def test_a_rule_missing_from_the_role_is_named(kube: Any, pod: Pod, echo_image: str, lookups: list[str],
                                               rule: tuple[str, str, tuple[str, ...]], verb: str,
                                               access: str) -> None:
    from kubernetes import client

    group, resource, _ = rule
    rbac = client.RbacAuthorizationV1Api(kube.core.api_client)
    rbac.patch_namespaced_role(ROLE, pod.namespace, {"rules": _role_rules(r for r in REQUIRED_RULES if r != rule)})
    _wait_authorized(pod, kube.core.api_client.configuration.host, [(group, resource, (verb,))], allowed=False)
    provider = KubernetesProvider()
    started = time.monotonic()
    with pytest.raises(AccessDenied) as info:
        provider.start(LaunchSpec(env="echo", startup_timeout_s=120, options={"access": access}))
    assert time.monotonic() - started < 60, "a refused request must fail start at once, not at the timeout"
    text = str(info.value)
    assert f"user {pod.user!r} may not {verb} {resource} in namespace {pod.namespace}" in text, text
    assert f'Missing RBAC rule: {{apiGroups: ["{group}"], resources: ["{resource}"], verbs: [{verb}]}}' in text
    assert kube.wait_no_leftovers(namespace=pod.namespace) == []  # what was created before is deleted
