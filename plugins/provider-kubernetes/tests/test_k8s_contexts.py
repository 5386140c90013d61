"""Kubeconfig contexts on the real API server (``.ci/k8s-setup.sh``).

A temporary kubeconfig holds two clusters and three contexts: ``good`` (the real API server, with
a ``namespace:`` of its own, created here), ``dead`` (a loopback port nothing listens on; the
current context) and ``staging`` (the real API server, no namespace). Selecting ``good`` by option
or by ``$OPENENV_K8S_CONTEXT`` must run the server in the context's namespace; the dead current
context must fail in seconds with the API server's address; an unknown name must be refused with
a "did you mean" and the list of contexts before anything is sent.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_kubernetes.cluster import KubernetesUnavailable
from openenv_provider_kubernetes.provider import KubernetesProvider

_docker_testing = pytest.importorskip("openenv_provider_docker.testing",
                                      reason="needs openenvkit-provider-docker (openenv build) installed too")
raw_episode = _docker_testing.raw_episode

# The module-level import above skips this file where the docker provider is missing (nox -s packages);
# the marker selects it in `nox -s integration`.
pytestmark = [pytest.mark.kubernetes, pytest.mark.slow, pytest.mark.requires_plugins("provider-docker")]


def _closed_port() -> int:
    with socket.socket() as s:  # bound then released: nothing listens there afterwards
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Contexts:
    def __init__(self, path: Path, namespace: str, dead_port: int) -> None:
        self.path = path
        self.namespace = namespace
        self.dead_port = dead_port


@pytest.fixture
def contexts(kube: Any, make_namespace: Callable[[str], str], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Iterator[Contexts]:
    real = yaml.safe_load(Path(kube.kubeconfig).read_text())
    cluster = real["clusters"][0]["cluster"]
    user = real["users"][0]
    namespace = make_namespace("ctx")
    port = _closed_port()
    doc = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "real", "cluster": cluster},
                     {"name": "gone", "cluster": {**cluster, "server": f"https://127.0.0.1:{port}"}}],
        "users": [user],
        "contexts": [
            {"name": "good", "context": {"cluster": "real", "user": user["name"], "namespace": namespace}},
            {"name": "dead", "context": {"cluster": "gone", "user": user["name"], "namespace": namespace}},
            {"name": "staging", "context": {"cluster": "real", "user": user["name"]}},
        ],
        "current-context": "dead",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    # Only the context may choose the namespace here (the session fixture exports its own).
    monkeypatch.delenv("OPENENV_K8S_NAMESPACE", raising=False)
    monkeypatch.delenv("OPENENV_K8S_CONTEXT", raising=False)
    yield Contexts(path, namespace, port)


def _assert_runs_in(kube: Any, provider: KubernetesProvider, namespace: str, spec: LaunchSpec,
                    lister: KubernetesProvider | None = None) -> None:
    """``provider.start(spec)`` runs in ``namespace``; ``lister`` (default: ``provider``) is a
    provider whose own defaults select that context, as ``ps`` looks where the defaults point."""
    handle = provider.start(spec)
    try:
        assert handle.namespace == namespace
        pod = kube.core.read_namespaced_pod(handle.id, namespace)  # really there, in that namespace
        assert pod.status.phase == "Running"
        assert kube.core.read_namespaced_service(handle.id, namespace).spec.selector == {
            "openenv.org/instance": handle.id}
        assert handle.id not in {p.metadata.name for p in kube.core.list_namespaced_pod(kube.namespace).items}
        assert [i.id for i in (lister or provider).ps()] == [handle.id]
        replies = raw_episode(handle.base_url)
        assert [r["type"] for r in replies] == ["observation", "observation", "state"]
    finally:
        handle.stop()
    assert kube.wait_no_leftovers(namespace=namespace) == []


def test_named_context_launches_into_its_namespace(kube: Any, contexts: Contexts, echo_image: str) -> None:
    provider = KubernetesProvider(kubeconfig=str(contexts.path), context="good")
    _assert_runs_in(kube, provider, contexts.namespace, LaunchSpec(env="echo", startup_timeout_s=120))
    # The option on the spec selects it as well (the provider's defaults being the dead context).
    _assert_runs_in(kube, KubernetesProvider(kubeconfig=str(contexts.path)), contexts.namespace,
                    LaunchSpec(env="echo", startup_timeout_s=120, options={"context": "good"}), lister=provider)


def test_context_without_namespace_uses_default_unless_told(contexts: Contexts) -> None:
    cluster = KubernetesProvider(kubeconfig=str(contexts.path), context="staging").cluster()
    assert cluster.namespace == "default"
    assert cluster.server.startswith("https://127.0.0.1:") and not cluster.server.endswith(f":{contexts.dead_port}")
    cluster = KubernetesProvider(kubeconfig=str(contexts.path), context="staging", namespace="elsewhere").cluster()
    assert cluster.namespace == "elsewhere"


def test_dead_current_context_fails_fast_naming_the_server(contexts: Contexts) -> None:
    provider = KubernetesProvider(kubeconfig=str(contexts.path))
    started = time.monotonic()
    with pytest.raises(KubernetesUnavailable) as info:
        provider.start(LaunchSpec(env="echo", startup_timeout_s=60))
    assert time.monotonic() - started < 15, "a dead API server must fail in seconds"
    text = str(info.value)
    assert f"https://127.0.0.1:{contexts.dead_port}" in text and "did not answer" in text, text
    with pytest.raises(KubernetesUnavailable, match=f"127.0.0.1:{contexts.dead_port}"):
        provider.ps()


def test_unknown_context_is_refused_with_the_list(contexts: Contexts) -> None:
    provider = KubernetesProvider(kubeconfig=str(contexts.path), context="goood")
    with pytest.raises(ConfigError) as info:
        provider.start(LaunchSpec(env="echo", startup_timeout_s=30))
    text = str(info.value)
    assert "has no context 'goood'" in text and "Did you mean 'good'?" in text, text
    assert "Contexts: good, dead, staging." in text, text
    assert str(contexts.path) in text


def test_env_var_selects_the_context(kube: Any, contexts: Contexts, echo_image: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(contexts.path))
    monkeypatch.setenv("OPENENV_K8S_CONTEXT", "good")
    _assert_runs_in(kube, KubernetesProvider(), contexts.namespace, LaunchSpec(env="echo", startup_timeout_s=120))
    monkeypatch.setenv("OPENENV_K8S_CONTEXT", "nope")
    with pytest.raises(ConfigError, match="has no context 'nope'"):
        KubernetesProvider().ps()


def test_openenv_run_follows_the_context_env_var(kube: Any, contexts: Contexts, echo_image: str) -> None:
    openenv = shutil.which("openenv", path=str(Path(sys.executable).parent))
    assert openenv, "the openenv command is not installed next to this interpreter"
    env = {k: v for k, v in os.environ.items() if k != "OPENENV_K8S_NAMESPACE"}
    env.update(KUBECONFIG=str(contexts.path), OPENENV_K8S_CONTEXT="good")
    done = subprocess.run([openenv, "run", "echo", "--provider", "kubernetes", "--episodes", "1", "--seed", "1",
                           "--json"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert json.loads(done.stdout)["per_episode"][0]["steps"] > 0
    # Without the variable the dead current context is used, and says so.
    env.pop("OPENENV_K8S_CONTEXT")
    failed = subprocess.run([openenv, "run", "echo", "--provider", "kubernetes", "--episodes", "1"],
                            capture_output=True, text=True, timeout=120, env=env)
    assert failed.returncode != 0
    assert f"127.0.0.1:{contexts.dead_port}" in failed.stdout + failed.stderr, failed.stderr[-3000:]
    assert kube.wait_no_leftovers(namespace=contexts.namespace) == []


def test_kubeconfig_path_list_is_merged_like_kubectl(kube: Any, contexts: Contexts, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``$KUBECONFIG`` may list several files (``a:b``); a context defined only in a later file is
    found, and a missing file in the list is skipped, as kubectl does."""
    doc = yaml.safe_load(contexts.path.read_text())
    first, second = tmp_path / "first", tmp_path / "second"
    first.write_text(yaml.safe_dump({**doc, "contexts": [c for c in doc["contexts"] if c["name"] == "dead"]}))
    second.write_text(yaml.safe_dump({**doc, "contexts": [c for c in doc["contexts"] if c["name"] == "good"],
                                      "current-context": "good"}))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)]))
    monkeypatch.setenv("OPENENV_K8S_CONTEXT", "good")
    provider = KubernetesProvider()
    cluster = provider.cluster()
    assert cluster.namespace == contexts.namespace
    assert provider.ps() == []  # a real request, answered by the real API server
    monkeypatch.setenv("OPENENV_K8S_CONTEXT", "god")
    with pytest.raises(ConfigError) as info:
        KubernetesProvider().cluster()
    assert "Did you mean 'good'?" in str(info.value) and "Contexts: dead, good." in str(info.value)
    assert str(second) in str(info.value)
