"""Connecting to a cluster, and turning the API server's refusals into messages that say what to do.

Promises:

* ``connect(opts)`` loads a kubeconfig (``options['kubeconfig']``, else ``$KUBECONFIG`` - a list
  of files separated by ``:`` is merged as kubectl merges it -, else ``~/.kube/config``;
  ``options['context']``, else ``$OPENENV_K8S_CONTEXT``, selects a context) or, in a Pod, the
  service account (``options['in_cluster']``; automatic when ``KUBERNETES_SERVICE_HOST`` is set and
  no kubeconfig is named): the API server ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``
  and the ``token``, ``ca.crt`` and ``namespace`` files of ``options['serviceaccount_dir']`` (else
  ``$OPENENV_K8S_SERVICEACCOUNT_DIR``, else the Pod's mount,
  ``/var/run/secrets/kubernetes.io/serviceaccount``); the token file is re-read while the client
  runs, as the kubelet rotates it. A missing or broken configuration is a ``ConfigError`` naming
  what was tried (and the contexts that exist). The namespace is ``options['namespace']``, else
  ``$OPENENV_K8S_NAMESPACE``, else the context's, else the service account's, else ``default``.
* ``api_error(exc, doing=...)`` maps an error of the client to one of ours: ``AccessDenied``
  (403, naming the user, the RBAC rule that is missing, and every rule the provider needs),
  ``QuotaExceeded`` (403 from a ResourceQuota, naming the quota), ``KubernetesUnavailable`` (the
  API server did not answer), ``ConfigError`` (422: the API server found the object invalid).
  ``handshake_error`` does the same for a port-forward stream refused with 401/403 (the client
  reports those as status 0 with the reply in the text).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from openenv.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from openenv_provider_kubernetes.options import KubeOptions

__all__ = [
    "REQUIRED_RULES",
    "AccessDenied",
    "Cluster",
    "KubernetesUnavailable",
    "QuotaExceeded",
    "api_error",
    "connect",
    "handshake_error",
    "reraise",
    "status_of",
]

#: (apiGroup, resource, verbs) the provider needs in its namespace: the Role to grant.
REQUIRED_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("", "pods", ("create", "get", "list", "watch", "delete")),
    ("", "pods/log", ("get",)),
    ("", "pods/portforward", ("get", "create")),
    ("", "services", ("create", "get", "list", "delete")),
    ("", "endpoints", ("get",)),
    ("coordination.k8s.io", "leases", ("create", "list", "patch", "delete")),
    ("", "events", ("list",)),
)
_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\w+) resource "(?P<resource>[^"]+)"'
    r'(?: in API group "(?P<group>[^"]*)")?(?: in the namespace "(?P<ns>[^"]*)")?')


class KubernetesUnavailable(RuntimeError):
    """The API server did not answer (down, unreachable, or the connection broke)."""


class AccessDenied(RuntimeError):
    """The API server refused a request for lack of an RBAC rule (HTTP 403)."""


class QuotaExceeded(RuntimeError):
    """A ResourceQuota (or LimitRange) of the namespace refused the object (HTTP 403)."""


@dataclass
class Cluster:
    """A connected API client and where the provider works in it."""

    api_client: ApiClient
    namespace: str
    server: str
    #: Whether this is the Pod's own service account (then Service URLs are reachable).
    in_cluster: bool


def _rules_text() -> str:
    return "; ".join(f"{{apiGroups: [\"{g}\"], resources: [\"{r}\"], verbs: [{', '.join(v)}]}}"
                     for g, r, v in REQUIRED_RULES)


def connect(opts: KubeOptions, *, timeout_s: float = 10.0) -> Cluster:
    """Load the configuration ``opts`` select; nothing is sent to the API server yet."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    use_in_cluster = opts.in_cluster
    if use_in_cluster is None:
        use_in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not (
            opts.kubeconfig or os.environ.get("KUBECONFIG"))
    namespace = opts.namespace
    if use_in_cluster:
        from kubernetes.config.incluster_config import InClusterConfigLoader

        sa_dir = opts.serviceaccount_dir
        token, ca = os.path.join(sa_dir, "token"), os.path.join(sa_dir, "ca.crt")
        try:
            # The loader re-reads the token file (a projected token is rotated by the kubelet).
            InClusterConfigLoader(token_filename=token, cert_filename=ca).load_and_set(configuration)
        except (ConfigException, OSError) as exc:
            raise ConfigError(
                f"in-cluster Kubernetes configuration failed: {str(exc).rstrip('.')} (looked for {token} and "
                f"{ca}, and $KUBERNETES_SERVICE_HOST/_PORT). The directory is options['serviceaccount_dir'] or "
                "$OPENENV_K8S_SERVICEACCOUNT_DIR (default: the Pod's mount). Outside a Pod, name a kubeconfig "
                "(options['kubeconfig'] or $KUBECONFIG) instead.") from None
        namespace_file = os.path.join(sa_dir, "namespace")
        if namespace is None and os.path.exists(namespace_file):
            with open(namespace_file, encoding="utf-8") as f:
                namespace = f.read().strip() or None
    else:
        # $KUBECONFIG may list several files (a:b): the client merges them as kubectl does (a
        # context in any of them; missing files skipped), so the whole list is passed on.
        path = opts.kubeconfig or os.environ.get("KUBECONFIG") or None
        shown = path or "~/.kube/config"
        try:
            contexts, active = config.list_kube_config_contexts(config_file=path)
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"no usable kubeconfig at {shown}: {exc}. Set $KUBECONFIG or "
                              "options['kubeconfig'] (or options['in_cluster']=True inside a Pod).") from None
        names = [c.get("name") for c in contexts or []]
        chosen = active
        if opts.context is not None:
            chosen = next((c for c in contexts or [] if c.get("name") == opts.context), None)
            if chosen is None:
                from openenv.errors import did_you_mean

                raise ConfigError(f"kubeconfig {shown} has no context {opts.context!r}."
                                  f"{did_you_mean(opts.context, [n for n in names if n])} "
                                  f"Contexts: {', '.join(str(n) for n in names) or 'none'}.")
        try:
            config.load_kube_config(config_file=path, context=opts.context, client_configuration=configuration)
        except (ConfigException, OSError) as exc:
            raise ConfigError(f"kubeconfig {shown} (context {opts.context or 'current'}) cannot be "
                              f"used: {exc}") from None
        if namespace is None and chosen:
            namespace = (chosen.get("context") or {}).get("namespace") or None
    # One retry at most: a gone API server must fail in seconds, not after urllib3's default back-off.
    configuration.retries = 1
    return Cluster(api_client=client.ApiClient(configuration), namespace=namespace or "default",
                   server=str(configuration.host), in_cluster=use_in_cluster)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a client ``ApiException`` (``None`` for anything else)."""
    from kubernetes.client.exceptions import ApiException

    return exc.status if isinstance(exc, ApiException) else None


def _message(exc: Any) -> str:
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return str(exc.body or exc.reason or exc)
    return str(body.get("message") or exc.reason or exc)


def api_error(exc: BaseException, *, doing: str, server: str = "") -> BaseException:
    """Our error for an exception of the client raised while ``doing`` (``"creating the Pod x"``);
    returns ``exc`` unchanged when there is nothing to add."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, ApiException):
        message = _message(exc)
        if exc.status == 403 and "exceeded quota" in message:
            return QuotaExceeded(f"the namespace's ResourceQuota refused {doing}: {message}. Lower "
                                 "options['cpu'/'memory'/'cpu_request'/'memory_request'], stop other "
                                 "servers, or raise the quota.")
        if exc.status == 403:
            match = _FORBIDDEN.search(message)
            if match:
                group = match.group("group") or ""
                where = f"namespace {match.group('ns')}" if match.group("ns") else "the cluster"
                return AccessDenied(
                    f"the API server refused {doing}: user {match.group('user')!r} may not "
                    f"{match.group('verb')} {match.group('resource')} in {where}. Missing RBAC rule: "
                    f"{{apiGroups: [\"{group}\"], resources: [\"{match.group('resource')}\"], verbs: "
                    f"[{match.group('verb')}]}}. The kubernetes provider needs a Role (and RoleBinding "
                    f"for this user) with: {_rules_text()}.")
            return AccessDenied(f"the API server refused {doing} (403): {message}. The kubernetes provider "
                                f"needs a Role with: {_rules_text()}.")
        if exc.status == 401:
            return AccessDenied(f"the API server did not accept our credentials while {doing} (401): "
                                f"{message}. Check the kubeconfig's user (expired token or certificate?).")
        if exc.status == 422:
            return ConfigError(f"the API server found the object invalid while {doing}: {message}")
        if exc.status == 0 or exc.status is None:
            return KubernetesUnavailable(f"the API server {server} broke the connection while {doing}: {exc}")
        return exc
    # Not the builtin TimeoutError: that is ours (a Pod not ready in time), not the API server's.
    if isinstance(exc, Urllib3Error | ConnectionError):
        return KubernetesUnavailable(
            f"the Kubernetes API server {server} did not answer while {doing}: {type(exc).__name__}: {exc}. "
            "Is the cluster up, and does the kubeconfig point at it?")
    return exc


_HANDSHAKE = re.compile(r"Handshake status (?P<code>\d{3})[^-]*(?:-\+-\+-.*?-\+-\+-\s*(?P<body>.*))?", re.S)


def handshake_error(exc: BaseException, *, doing: str, server: str = "") -> BaseException | None:
    """Our error for a WebSocket stream (port-forward) the API server refused with 401/403, or
    ``None``: the client reports those as an ``ApiException`` with status 0 and the HTTP status,
    headers and body in its reason text."""
    from kubernetes.client.exceptions import ApiException

    if not isinstance(exc, ApiException) or exc.status not in (0, None):
        return None
    match = _HANDSHAKE.search(str(exc.reason or ""))
    if match is None or match.group("code") not in ("401", "403"):
        return None
    refused = ApiException(status=int(match.group("code")), reason="Forbidden",
                           body=(match.group("body") or "").strip() or None)
    return api_error(refused, doing=doing, server=server)


def reraise(exc: BaseException, *, doing: str, server: str = "") -> NoReturn:
    """Raise ``api_error(exc, ...)`` (chained to ``exc``), or ``exc`` itself when it maps to nothing."""
    mapped = api_error(exc, doing=doing, server=server)
    if mapped is exc:
        raise exc
    raise mapped from exc
