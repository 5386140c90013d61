"""The Pod and Service the provider creates for one env server (plain API dicts).

Promises:

* The Pod is hardened by default: ``automountServiceAccountToken: false``, no service links, pod
  ``runAsNonRoot`` (UID 10001 for images of ``openenv build``), ``seccompProfile: RuntimeDefault``,
  and for the container ``allowPrivilegeEscalation: false``, ``privileged: false``, every
  capability dropped and a read-only root filesystem with an ``emptyDir`` (size-limited) at
  ``/tmp``. Each relaxation is an explicit option.
* Requests and limits come from the options, else from the env manifest's ``resources:``
  (``cpu``, ``memory`` as a quantity or ``memory_mb`` in MiB, optional ``requests: {cpu, memory}``),
  else from the defaults (limits 1 CPU / 512Mi, requests 100m / 128Mi, a default request lowered
  to the limit when the limit is smaller).
* Secrets (``spec.token``, ``spec.env_vars``) go only into the container's environment, never into
  its arguments, labels or annotations.
* ``restartPolicy: Never``: a server that exits is reported as stopped (its sessions are gone
  anyway) instead of coming back empty behind the client's back.
* The readiness probe is ``GET /health``, so the Pod's ``Ready`` condition means what the kernel's
  probe starts from.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from openenv.errors import ConfigError
from openenv.interfaces import LaunchSpec
from openenv_provider_kubernetes.naming import (
    ANNOTATION_OWNER,
    LABEL_INSTANCE,
    SERVER_PORT,
    derived_image,
    is_image_reference,
)
from openenv_provider_kubernetes.options import KubeOptions

__all__ = ["BUILD_UID", "Resources", "ServerImage", "manifest_extras", "pod_body", "resolve_image",
           "service_body"]

#: The UID images made by ``openenv build`` run as.
BUILD_UID = 10001
_DEFAULT_LIMITS = {"cpu": "1", "memory": "512Mi"}
_DEFAULT_REQUESTS = {"cpu": "100m", "memory": "128Mi"}


@dataclass(frozen=True)
class ServerImage:
    """The image to run and what is known about it without pulling it."""

    ref: str
    env: str
    #: Made by ``openenv build`` (derived from the env name): its server is ``python -m openenv serve``.
    built: bool


def resolve_image(spec: LaunchSpec) -> ServerImage:
    """``spec.image`` wins; else an image reference in ``spec.env``; else the derived tag."""
    if spec.image:
        return ServerImage(ref=spec.image, env=spec.env if not is_image_reference(spec.env) else spec.image,
                           built=False)
    if is_image_reference(spec.env):
        return ServerImage(ref=spec.env, env=spec.env, built=False)
    return ServerImage(ref=derived_image(spec.env), env=spec.env, built=True)


@dataclass(frozen=True)
class Resources:
    limits: dict[str, str]
    requests: dict[str, str]


def manifest_extras(env: str) -> dict[str, Any]:
    """The extra keys (``resources:``, ``read_only_root:``) of the installed env's ``openenv.yaml``
    (``{}`` when the env is not installed here or has no manifest)."""
    try:
        from openenv.manifest import load_manifest, locate_manifest
        from openenv.plugins import get_plugin_manager

        entry = get_plugin_manager().catalog.envs.get(env)
        raw = entry.extra.get("manifest")
        if not raw:
            return {}
        manifest = load_manifest(locate_manifest(raw))
    except Exception:  # not installed here, or no manifest: the defaults apply
        return {}
    return dict(manifest.model_extra or {})


def _manifest_limits(from_manifest: dict[str, Any]) -> dict[str, str]:
    """``cpu`` and memory limits of a manifest's ``resources:``: ``memory`` is a Kubernetes quantity,
    ``memory_mb`` (what the in-repo manifests write) a number of MiB; giving both is refused."""
    limits: dict[str, str] = {}
    if from_manifest.get("cpu") is not None:
        limits["cpu"] = str(from_manifest["cpu"])
    memory, memory_mb = from_manifest.get("memory"), from_manifest.get("memory_mb")
    if memory is not None and memory_mb is not None:
        raise ConfigError(f"The env manifest's resources give both memory ({memory!r}) and memory_mb "
                          f"({memory_mb!r}): keep one.")
    if memory is not None:
        limits["memory"] = str(memory)
    elif memory_mb is not None:
        if isinstance(memory_mb, bool) or not isinstance(memory_mb, (int, float)) or memory_mb <= 0:
            raise ConfigError(f"The env manifest's resources.memory_mb is {memory_mb!r}: it must be a "
                              "positive number of MiB (or give memory: as a Kubernetes quantity, e.g. 256Mi).")
        limits["memory"] = f"{memory_mb:g}Mi"
    return limits


def _resources(opts: KubeOptions, extras: dict[str, Any]) -> Resources:
    from kubernetes.utils.quantity import parse_quantity

    raw = extras.get("resources")
    from_manifest: dict[str, Any] = raw if isinstance(raw, dict) else {}
    limits = {**_DEFAULT_LIMITS, **_manifest_limits(from_manifest)}
    requests: dict[str, str] = {}
    manifest_requests = from_manifest.get("requests") or {}
    for key in ("cpu", "memory"):
        if isinstance(manifest_requests, dict) and manifest_requests.get(key) is not None:
            requests[key] = str(manifest_requests[key])
    if opts.cpu:
        limits["cpu"] = opts.cpu
    if opts.memory:
        limits["memory"] = opts.memory
    if opts.cpu_request:
        requests["cpu"] = opts.cpu_request
    if opts.memory_request:
        requests["memory"] = opts.memory_request
    for key, default in _DEFAULT_REQUESTS.items():
        # A default request never exceeds the limit (the API server refuses request > limit): a
        # manifest's 64 MiB limit gets a 64Mi request, not the default 128Mi.
        if key not in requests:
            requests[key] = default
            with contextlib.suppress(ValueError):
                if parse_quantity(default) > parse_quantity(limits[key]):
                    requests[key] = limits[key]
    return Resources(limits=limits, requests=requests)


def server_args(image: ServerImage, spec: LaunchSpec, opts: KubeOptions) -> list[str] | None:
    """The container's arguments: ``options['args']``, else the ``openenv serve`` line of an
    ``openenv build`` image, else ``None`` (the image's own command)."""
    if opts.args is not None:
        return list(opts.args)
    if spec.max_sessions is not None and spec.max_sessions < 1:
        raise ConfigError(f"max_sessions={spec.max_sessions}: must be at least 1.")
    if not image.built:
        if opts.host_port is not None:
            raise ConfigError("options['host_port'] needs the server command: give options['args'] "
                              "(the server must listen on 127.0.0.1:<host_port>).")
        return None
    host, port = ("127.0.0.1", opts.host_port) if opts.host_port is not None else ("0.0.0.0", SERVER_PORT)
    # 0.0.0.0 is the Pod's own network namespace, reached through the API server's port-forward or
    # the cluster-internal Service: not an open server, so the wide-bind refusal is waived.
    wide = ["--allow-open"] if host != "127.0.0.1" else []
    return ["python", "-m", "openenv", "serve", image.env, "--host", host, "--port", str(port),
            *spec.max_sessions_args(), *wide]


def server_environment(spec: LaunchSpec) -> list[dict[str, str]]:
    environment = {str(k): str(v) for k, v in spec.env_vars.items()}
    if spec.token:
        environment["OPENENV_TOKEN"] = spec.token
    if spec.mode:
        environment["OPENENV_MODE"] = spec.mode
    return [{"name": k, "value": v} for k, v in sorted(environment.items())]


def pod_body(*, name: str, spec: LaunchSpec, opts: KubeOptions, image: ServerImage, labels: dict[str, str],
             owner: str, extras: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Pod for one env server (see the module docstring for what it promises); ``extras`` are
    the env manifest's extra keys (``manifest_extras``)."""
    extras = extras or {}
    resources = _resources(opts, extras)
    read_only = opts.read_only_root if opts.read_only_root is not None else extras.get("read_only_root") is not False
    port = opts.host_port or SERVER_PORT
    run_as_user = opts.run_as_user if opts.run_as_user is not None else (BUILD_UID if image.built else None)
    pod_security: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if opts.run_as_non_root:
        pod_security["runAsNonRoot"] = True
    if run_as_user is not None:
        pod_security["runAsUser"] = run_as_user
        pod_security["runAsGroup"] = run_as_user
        pod_security["fsGroup"] = run_as_user
    container: dict[str, Any] = {
        "name": "server",
        "image": image.ref,
        "imagePullPolicy": opts.image_pull_policy,
        "env": server_environment(spec),
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "resources": {"limits": resources.limits, "requests": resources.requests},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": read_only,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": port, **({"host": "127.0.0.1"} if opts.host_port else {})},
            "periodSeconds": 1, "timeoutSeconds": 2, "failureThreshold": 3,
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    args = server_args(image, spec, opts)
    if args is not None:
        container["args"] = args
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 10,
        "securityContext": pod_security,
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": opts.tmp_size}}],
    }
    if opts.host_port is not None:
        pod_spec["hostNetwork"] = True
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "annotations": {ANNOTATION_OWNER: owner}},
        "spec": pod_spec,
    }


def service_body(*, name: str, labels: dict[str, str], owner: str, port: int = SERVER_PORT) -> dict[str, Any]:
    """A ClusterIP Service selecting exactly the Pod ``name`` (its ``openenv.org/instance`` label)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels, "annotations": {ANNOTATION_OWNER: owner}},
        "spec": {
            "type": "ClusterIP",
            "selector": {LABEL_INSTANCE: name},
            "ports": [{"name": "http", "port": SERVER_PORT, "targetPort": port, "protocol": "TCP"}],
        },
    }
