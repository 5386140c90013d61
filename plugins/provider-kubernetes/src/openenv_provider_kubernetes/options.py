"""``LaunchSpec.options`` of the ``kubernetes`` provider: parsing, validation and hardened defaults.

=======================  ====================  ================================================
option                   default               effect
=======================  ====================  ================================================
``namespace``            context's, else       namespace of the Pod and Service
                         ``default``
``context``              current context       kubeconfig context
``kubeconfig``           ``$KUBECONFIG``       kubeconfig file
``in_cluster``           auto                  use the Pod's service account (auto: when
                                               ``KUBERNETES_SERVICE_HOST`` is set and no
                                               kubeconfig is given)
``serviceaccount_dir``   the Pod's mount       where in-cluster config reads ``token``,
                         (see below)           ``ca.crt`` and ``namespace``
``access``               ``port-forward``      ``port-forward`` (through the API server, to a
                         (``service`` in       local 127.0.0.1 port) or ``service``
                         cluster)              (``http://<svc>.<ns>.svc:8000``, in-cluster)
``cpu`` / ``memory``     ``"1"`` / ``"512Mi"``  limits (Kubernetes quantities); the env
                                               manifest's ``resources:`` overrides the defaults
``cpu_request`` /        ``"100m"`` /          requests
``memory_request``       ``"128Mi"``
``read_only_root``       ``True`` unless the   read-only root filesystem (emptyDir at /tmp);
                         manifest says         the env manifest's ``read_only_root: false``
                         ``false``             turns it off
``tmp_size``             ``"64Mi"``            size limit of the /tmp emptyDir
``run_as_user``          10001 for images of   UID; ``openenv build`` images run as 10001
                         ``openenv build``
``run_as_non_root``      ``True``              the kubelet refuses to start a root container
``image_pull_policy``    ``IfNotPresent``      ``Never``, ``IfNotPresent`` or ``Always``
``args``                 the serve command     the container's argument list (other images)
``service``              ``True``              create a ClusterIP Service for the Pod
``labels``               ``{}``                extra labels on every object
``warm_pool``            ``0``                 keep N ready Pods for this spec (fast ``start``)
``host_port``            unset                 single-node dev clusters: hostNetwork Pod whose
                                               server listens on 127.0.0.1:<port> of the node
``lease_duration_s``     ``60``                ``leaseDurationSeconds`` of the owner Lease
                                               (renewed every third of it): how long after
                                               its owner died ``gc`` on another host waits
=======================  ====================  ================================================

Unknown option names are refused with the list of known ones (and a "did you mean"), so a typo
never silently drops a limit. ``OPENENV_K8S_NAMESPACE``, ``OPENENV_K8S_CONTEXT`` and
``KUBECONFIG`` give the first three when the options do not (what ``openenv run`` relies on), as
``OPENENV_K8S_SERVICEACCOUNT_DIR`` gives ``serviceaccount_dir`` (default: where the kubelet mounts
it in a Pod, ``/var/run/secrets/kubernetes.io/serviceaccount``) and ``OPENENV_K8S_LEASE_DURATION_S``
gives ``lease_duration_s``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import ConfigError, did_you_mean

__all__ = ["KEYS", "SERVICEACCOUNT_DIR", "KubeOptions", "parse_options"]

KEYS = frozenset({
    "namespace", "context", "kubeconfig", "in_cluster", "access", "cpu", "memory", "cpu_request",
    "memory_request", "read_only_root", "tmp_size", "run_as_user", "run_as_non_root",
    "image_pull_policy", "args", "service", "labels", "warm_pool", "host_port", "serviceaccount_dir",
    "lease_duration_s",
})
#: Where a Pod's service-account token, CA and namespace are mounted.
SERVICEACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
ACCESS_MODES = ("port-forward", "service")
PULL_POLICIES = ("Never", "IfNotPresent", "Always")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class KubeOptions:
    """Checked options (see the module docstring for each)."""

    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None
    in_cluster: bool | None = None
    access: str | None = None
    cpu: str | None = None
    memory: str | None = None
    cpu_request: str | None = None
    memory_request: str | None = None
    read_only_root: bool | None = None
    tmp_size: str = "64Mi"
    run_as_user: int | None = None
    run_as_non_root: bool = True
    image_pull_policy: str = "IfNotPresent"
    args: tuple[str, ...] | None = None
    service: bool = True
    labels: dict[str, str] = field(default_factory=dict)
    warm_pool: int = 0
    host_port: int | None = None
    serviceaccount_dir: str = SERVICEACCOUNT_DIR
    lease_duration_s: int = 60

    def connection_key(self) -> tuple[str | None, str | None, bool | None, str]:
        """What selects the cluster (a provider keeps one API client per key)."""
        return (self.kubeconfig, self.context, self.in_cluster, self.serviceaccount_dir)


def _bad(name: str, value: Any, want: str) -> ConfigError:
    return ConfigError(f"options[{name!r}]={value!r}: {want}.")


def _quantity(name: str, value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not _QUANTITY.match(text):
        raise _bad(name, value, "must be a Kubernetes quantity such as '500m', '2', '256Mi' or '1Gi'")
    return text


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _bad(name, value, "must be true or false")


def _positive_int(name: str, value: Any, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(name, value, f"must be a whole number from {low} to {high}")
    return value


def _text(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise _bad(name, value, "must be a non-empty string")
    return value


def parse_options(options: Mapping[str, Any]) -> KubeOptions:
    """Check ``LaunchSpec.options``; ``ConfigError`` names the first bad one and what to write."""
    for key in options:
        if key not in KEYS:
            raise ConfigError(f"Unknown option {key!r} for the kubernetes provider.{did_you_mean(key, KEYS)} "
                              f"Known options: {', '.join(sorted(KEYS))}.")
    o = dict(options)
    namespace = _text("namespace", o.get("namespace")) or os.environ.get("OPENENV_K8S_NAMESPACE") or None
    if namespace is not None and not _DNS_LABEL.match(namespace):
        raise _bad("namespace", namespace, "must be a DNS label (lower-case letters, digits and '-')")
    access = o.get("access")
    if access is not None and access not in ACCESS_MODES:
        raise _bad("access", access, f"must be one of {', '.join(ACCESS_MODES)}"
                   f"{did_you_mean(str(access), ACCESS_MODES)}")
    pull = o.get("image_pull_policy", "IfNotPresent")
    if pull not in PULL_POLICIES:
        raise _bad("image_pull_policy", pull, f"must be one of {', '.join(PULL_POLICIES)}"
                   f"{did_you_mean(str(pull), PULL_POLICIES)}")
    args = o.get("args")
    if args is not None and (not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args)
                             or not args):
        raise _bad("args", args, "must be a non-empty list of strings")
    labels = o.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise _bad("labels", labels, "must be a mapping of label names to values")
    run_as_user = o.get("run_as_user")
    if run_as_user is not None:
        run_as_user = _positive_int("run_as_user", run_as_user, low=0, high=2**31 - 1)
    run_as_non_root = _bool("run_as_non_root", o.get("run_as_non_root", True))
    if run_as_user == 0 and run_as_non_root:
        raise ConfigError("options['run_as_user']=0 runs as root, which run_as_non_root=True (the default) "
                          "refuses. Pass run_as_non_root=False too if the env really needs root.")
    host_port = o.get("host_port")
    if host_port is not None:
        host_port = _positive_int("host_port", host_port, low=1024, high=65535)
    in_cluster = o.get("in_cluster")
    return KubeOptions(
        namespace=namespace,
        context=_text("context", o.get("context")) or os.environ.get("OPENENV_K8S_CONTEXT") or None,
        kubeconfig=_text("kubeconfig", o.get("kubeconfig")),
        in_cluster=None if in_cluster is None else _bool("in_cluster", in_cluster),
        access=access,
        cpu=_quantity("cpu", o.get("cpu")),
        memory=_quantity("memory", o.get("memory")),
        cpu_request=_quantity("cpu_request", o.get("cpu_request")),
        memory_request=_quantity("memory_request", o.get("memory_request")),
        read_only_root=None if o.get("read_only_root") is None else _bool("read_only_root", o["read_only_root"]),
        tmp_size=_quantity("tmp_size", o.get("tmp_size", "64Mi")) or "64Mi",
        run_as_user=run_as_user,
        run_as_non_root=run_as_non_root,
        image_pull_policy=pull,
        args=tuple(args) if args is not None else None,
        service=_bool("service", o.get("service", True)),
        labels={str(k): str(v) for k, v in labels.items()},
        warm_pool=_positive_int("warm_pool", o.get("warm_pool", 0), low=0, high=64),
        host_port=host_port,
        serviceaccount_dir=(_text("serviceaccount_dir", o.get("serviceaccount_dir"))
                            or os.environ.get("OPENENV_K8S_SERVICEACCOUNT_DIR") or SERVICEACCOUNT_DIR),
        lease_duration_s=_lease_duration(o.get("lease_duration_s")),
    )


def _lease_duration(value: Any) -> int:
    low, high = 3, 86400
    if value is not None:
        return _positive_int("lease_duration_s", value, low=low, high=high)
    text = os.environ.get("OPENENV_K8S_LEASE_DURATION_S", "").strip()
    if not text:
        return 60
    if not text.isdigit() or not low <= int(text) <= high:
        raise ConfigError(f"$OPENENV_K8S_LEASE_DURATION_S={text!r}: must be a whole number of seconds from "
                          f"{low} to {high}.")
    return int(text)
