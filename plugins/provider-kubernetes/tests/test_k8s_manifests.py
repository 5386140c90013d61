"""The Pod/Service bodies, options, names and error messages, without a cluster."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import pytest

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_kubernetes.cluster import (
    AccessDenied,
    KubernetesUnavailable,
    QuotaExceeded,
    api_error,
    handshake_error,
)
from openenv_provider_kubernetes.manifests import pod_body, resolve_image, service_body
from openenv_provider_kubernetes.naming import (
    LABEL_INSTANCE,
    LABEL_OWNER,
    label_value,
    managed_labels,
    object_name,
    selector,
)
from openenv_provider_kubernetes.options import parse_options
from openenv_provider_kubernetes.pods import describe, endpoint_state

OWNER = "host-a:1234:98765"


def _pod(spec: LaunchSpec, **options: Any) -> dict[str, Any]:
    opts = parse_options(options)
    image = resolve_image(spec)
    name = object_name(image.env, "abc123")
    labels = managed_labels(owner=OWNER, env=image.env, instance=name)
    return pod_body(name=name, spec=spec, opts=opts, image=image, labels=labels, owner=OWNER)


def test_pod_is_hardened_by_default() -> None:
    body = _pod(LaunchSpec(env="echo", max_sessions=3, token="s3cret", env_vars={"K": "v"}))
    spec = body["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == 10001
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = spec["containers"]
    sc = container["securityContext"]
    assert sc == {"allowPrivilegeEscalation": False, "privileged": False, "readOnlyRootFilesystem": True,
                  "capabilities": {"drop": ["ALL"]}}
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert spec["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert container["resources"] == {"limits": {"cpu": "1", "memory": "512Mi"},
                                      "requests": {"cpu": "100m", "memory": "128Mi"}}
    assert container["args"][-3:] == ["--max-sessions", "3", "--allow-open"]  # the Pod's own netns
    assert container["image"].startswith("openenv-echo:")
    # Secrets only in the environment: never in args, labels or annotations.
    assert {"name": "OPENENV_TOKEN", "value": "s3cret"} in container["env"]
    assert {"name": "K", "value": "v"} in container["env"]
    outside_env = json.dumps([container["args"], body["metadata"]])
    assert "s3cret" not in outside_env
    assert body["metadata"]["annotations"]["openenv.org/owner"] == OWNER


def test_options_relax_and_size_the_pod() -> None:
    body = _pod(LaunchSpec(env="registry.local/x/y:1"), read_only_root=False, run_as_non_root=False,
                cpu="250m", memory="1Gi", memory_request="64Mi", image_pull_policy="Never")
    (container,) = body["spec"]["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert "runAsNonRoot" not in body["spec"]["securityContext"]
    assert "runAsUser" not in body["spec"]["securityContext"]  # not an openenv build image
    assert "args" not in container  # the image keeps its own command
    assert container["resources"]["limits"] == {"cpu": "250m", "memory": "1Gi"}
    assert container["resources"]["requests"]["memory"] == "64Mi"
    assert container["imagePullPolicy"] == "Never"


def test_manifest_resources_apply_unless_options_say_otherwise() -> None:
    spec = LaunchSpec(env="echo")
    opts = parse_options({"cpu": "2"})
    image = resolve_image(spec)
    extras = {"resources": {"cpu": "500m", "memory": "2Gi", "requests": {"memory": "1Gi"}}, "read_only_root": False}
    body = pod_body(name="n", spec=spec, opts=opts, image=image, labels={}, owner=OWNER, extras=extras)
    (container,) = body["spec"]["containers"]
    assert container["resources"]["limits"] == {"cpu": "2", "memory": "2Gi"}
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "1Gi"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is False



REPO = Path(__file__).resolve().parents[3]


def _manifest_pod(manifest: str) -> dict[str, Any]:
    """The Pod for an env whose manifest is the in-repo file ``manifest`` (relative to the repo)."""
    from openenv.manifest import load_manifest

    spec = LaunchSpec(env="echo")
    extras = dict(load_manifest(REPO / manifest).model_extra or {})
    return pod_body(name="n", spec=spec, opts=parse_options({}), image=resolve_image(spec), labels={},
                    owner=OWNER, extras=extras)


@pytest.mark.parametrize(("manifest", "limits", "requests"), [
    # resources: {cpu: 0.1, memory_mb: 64}: the default 128Mi request is lowered to the 64Mi limit.
    ("envs/maze/src/openenv_env_maze/openenv.yaml", {"cpu": "0.1", "memory": "64Mi"},
     {"cpu": "100m", "memory": "64Mi"}),
    ("envs/chess/src/openenv_env_chess/openenv.yaml", {"cpu": "1", "memory": "128Mi"},
     {"cpu": "100m", "memory": "128Mi"}),
])
def test_in_repo_manifests_memory_mb_sizes_the_pod(manifest: str, limits: dict[str, str],
                                                    requests: dict[str, str]) -> None:
    (container,) = _manifest_pod(manifest)["spec"]["containers"]
    assert container["resources"] == {"limits": limits, "requests": requests}


@pytest.mark.parametrize(("resources", "message"), [
    ({"memory": "1Gi", "memory_mb": 64}, "both memory .* and memory_mb"),
    ({"memory_mb": "64"}, "memory_mb is '64': it must be a positive number of MiB"),
    ({"memory_mb": 0}, "positive number of MiB"),
])
def test_bad_manifest_memory_is_refused(resources: dict[str, Any], message: str) -> None:
    spec = LaunchSpec(env="echo")
    with pytest.raises(ConfigError, match=message):
        pod_body(name="n", spec=spec, opts=parse_options({}), image=resolve_image(spec), labels={},
                 owner=OWNER, extras={"resources": resources})


def test_a_default_request_never_exceeds_a_smaller_limit() -> None:
    (container,) = _pod(LaunchSpec(env="echo"), cpu="50m", memory="64Mi")["spec"]["containers"]
    assert container["resources"] == {"limits": {"cpu": "50m", "memory": "64Mi"},
                                      "requests": {"cpu": "50m", "memory": "64Mi"}}

def test_host_port_pods_listen_on_loopback_only() -> None:
    body = _pod(LaunchSpec(env="echo"), host_port=18123)
    (container,) = body["spec"]["containers"]
    assert body["spec"]["hostNetwork"] is True
    assert container["args"][container["args"].index("--host") + 1] == "127.0.0.1"
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 18123, "host": "127.0.0.1"}
    with pytest.raises(ConfigError, match="needs the server command"):
        _pod(LaunchSpec(env="echo", image="other:1"), host_port=18123)


def test_service_selects_exactly_its_pod() -> None:
    body = service_body(name="openenv-echo-abc", labels={"a": "b"}, owner=OWNER)
    assert body["spec"]["selector"] == {LABEL_INSTANCE: "openenv-echo-abc"}
    assert body["spec"]["type"] == "ClusterIP"
    assert body["spec"]["ports"][0]["port"] == 8000


@pytest.mark.parametrize(("options", "message"), [
    ({"memroy": "1Gi"}, "Did you mean 'memory'"),
    ({"memory": "lots"}, "Kubernetes quantity"),
    ({"access": "portforward"}, "Did you mean 'port-forward'"),
    ({"image_pull_policy": "never"}, "Did you mean 'Never'"),
    ({"namespace": "Bad_NS"}, "DNS label"),
    ({"run_as_user": 0}, "runs as root"),
    ({"warm_pool": -1}, "whole number"),
    ({"args": "python -m x"}, "list of strings"),
    ({"serviceaccount_dir": ""}, "non-empty string"),
    ({"lease_duration_s": 1}, "whole number from 3 to 86400"),
])
def test_bad_options_are_refused_with_advice(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options(options)


def test_lease_duration_comes_from_the_option_else_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_options({}).lease_duration_s == 60
    monkeypatch.setenv("OPENENV_K8S_LEASE_DURATION_S", "15")
    assert parse_options({}).lease_duration_s == 15
    assert parse_options({"lease_duration_s": 30}).lease_duration_s == 30
    monkeypatch.setenv("OPENENV_K8S_LEASE_DURATION_S", "soon")
    with pytest.raises(ConfigError, match=r"\$OPENENV_K8S_LEASE_DURATION_S='soon': must be a whole number"):
        parse_options({})


def test_names_and_labels_are_valid_kubernetes_values() -> None:
    import re

    dns = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    for env in ("echo", "Grid_World", "x" * 80, "--odd--"):
        name = object_name(env, "0123456789")
        assert dns.match(name) and len(name) <= 63, name
    value_re = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    for owner in (OWNER, "h" * 100 + ":1:2", "a.b:c"):
        value = label_value(owner)
        assert value_re.match(value) and len(value) <= 63, value
    assert label_value("h" * 100 + ":1:2") != label_value("h" * 100 + ":1:3")
    assert selector(OWNER).endswith(f"{LABEL_OWNER}={label_value(OWNER)}")


def _api_exception(status: int, message: str) -> Exception:
    from kubernetes.client.exceptions import ApiException

    exc = ApiException(status=status, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


def test_forbidden_names_the_missing_rbac_rule() -> None:
    exc = api_error(_api_exception(403, 'pods is forbidden: User "alice" cannot create resource "pods" in API '
                                        'group "" in the namespace "team-a"'), doing="creating the Pod x")
    assert isinstance(exc, AccessDenied)
    text = str(exc)
    assert "user 'alice' may not create pods in namespace team-a" in text
    assert 'Missing RBAC rule: {apiGroups: [""], resources: ["pods"], verbs: [create]}' in text
    assert "pods/portforward" in text  # the whole Role the provider needs


def test_a_refused_port_forward_handshake_names_the_missing_rule() -> None:
    """The client reports a refused WebSocket upgrade as status 0 with the reply in its text
    (the shape the real API server's refusal had in test_k8s_in_cluster.py)."""
    from kubernetes.client.exceptions import ApiException

    body = json.dumps({"kind": "Status", "code": 403, "message": 'pods "p" is forbidden: User "system:serviceaccount:'
                       'ns:sa" cannot get resource "pods/portforward" in API group "" in the namespace "ns"'})
    refused = ApiException(status=0, reason=f"Handshake status 403 Forbidden -+-+- {{'date': 'x'}} -+-+- {body}")
    exc = handshake_error(refused, doing="opening a port-forward to the Pod ns/p")
    assert isinstance(exc, AccessDenied)
    assert "user 'system:serviceaccount:ns:sa' may not get pods/portforward in namespace ns" in str(exc)
    assert 'Missing RBAC rule: {apiGroups: [""], resources: ["pods/portforward"], verbs: [get]}' in str(exc)
    # Anything else is not a refusal: a Pod not listening yet, a broken connection, a 500.
    assert handshake_error(ApiException(status=0, reason="Connection refused"), doing="x") is None
    assert handshake_error(ApiException(status=0, reason="Handshake status 500 Internal -+-+- {} -+-+- {}"),
                           doing="x") is None
    assert handshake_error(ValueError("Handshake status 403"), doing="x") is None


def test_quota_and_unreachable_errors_say_what_to_do() -> None:
    from urllib3.exceptions import MaxRetryError

    quota = api_error(_api_exception(403, 'pods "x" is forbidden: exceeded quota: q1, requested: limits.memory=512Mi, '
                                          'used: limits.memory=0, limited: limits.memory=100Mi'), doing="creating")
    assert isinstance(quota, QuotaExceeded) and "exceeded quota: q1" in str(quota) and "raise the quota" in str(quota)
    down = api_error(MaxRetryError(None, "/api", "refused"), doing="creating the Pod x", server="https://127.0.0.1:1")
    assert isinstance(down, KubernetesUnavailable) and "did not answer while creating the Pod x" in str(down)
    invalid = api_error(_api_exception(422, "Pod is invalid"), doing="creating")
    assert isinstance(invalid, ConfigError)


def _status(**kw: Any) -> Any:
    return SimpleNamespace(**kw)


def test_describe_tells_fatal_states_from_waiting_ones() -> None:
    def pod(state: Any, phase: str = "Pending", restarts: int = 0) -> Any:
        cs = _status(name="server", state=state, restart_count=restarts)
        return _status(status=_status(phase=phase, container_statuses=[cs], conditions=[], reason=None, message=None))

    creating = _status(waiting=_status(reason="ContainerCreating", message=None), terminated=None)
    assert describe(pod(creating))[1] is False
    text, final = describe(pod(_status(waiting=_status(reason="ErrImageNeverPull", message="not present"),
                                       terminated=None)))
    assert final and "ErrImageNeverPull: not present" in text
    text, final = describe(pod(_status(waiting=None, terminated=_status(reason="Error", exit_code=3, message=None)),
                               phase="Failed"))
    assert final and "exit code 3" in text


def test_our_own_errors_are_not_mistaken_for_an_unreachable_api_server() -> None:
    slow = TimeoutError("Pod x not ready in time")
    assert api_error(slow, doing="waiting") is slow


def test_skip_or_fail_fails_when_kubernetes_is_required(skip_or_fail: Callable[[str], NoReturn],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_REQUIRE_KUBERNETES", "1")
    with pytest.raises(pytest.fail.Exception, match="OPENENV_REQUIRE_KUBERNETES is set but no thing"):
        skip_or_fail("no thing")
    monkeypatch.delenv("OPENENV_REQUIRE_KUBERNETES")
    with pytest.raises(pytest.skip.Exception, match="no thing"):
        skip_or_fail("no thing")


def test_real_cluster_tests_never_skip_behind_the_require_variable() -> None:
    """A missing part of the cluster must fail in CI (``OPENENV_REQUIRE_KUBERNETES=1``), so the
    real-cluster tests (every other test_k8s_*.py) skip only through ``skip_or_fail``, never
    ``pytest.skip`` directly."""
    import ast

    files = sorted(p for p in Path(__file__).parent.glob("test_k8s_*.py") if p.name != Path(__file__).name)
    assert {"test_k8s_cluster.py", "test_k8s_in_cluster.py"} <= {p.name for p in files}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        direct = [node.lineno for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in {"skip", "skipif"} and isinstance(node.func.value, ast.Name)
                  and node.func.value.id == "pytest"]
        assert direct == [], f"{path.name} calls pytest.skip directly at lines {direct}"


def test_endpoint_state_wants_the_pod_ready_on_the_server_port() -> None:
    def address(pod: str, ip: str) -> dict[str, Any]:
        return {"ip": ip, "target_ref": {"name": pod}}

    assert endpoint_state({"subsets": None}, "p", 8000) == (False, "no addresses")
    not_ready = {"subsets": [{"ports": [{"port": 8000}], "not_ready_addresses": [address("p", "10.0.0.5")]}]}
    assert endpoint_state(not_ready, "p", 8000) == (False, "not ready p")
    other_port = {"subsets": [{"ports": [{"port": 9000}], "addresses": [address("p", "10.0.0.5")]}]}
    assert endpoint_state(other_port, "p", 8000) == (False, "ready p on [9000]")
    both = [address("q", "10.0.0.6"), address("p", "10.0.0.5")]
    ready = {"subsets": [{"ports": [{"port": 8000}], "addresses": both}]}
    assert endpoint_state(ready, "p", 8000) == (True, "ready 10.0.0.5:8000")
