"""Watching a Pod until it is ready, and saying why when it never will be.

Promises:

* ``wait_scheduled_ready(core, namespace, name, deadline)`` watches the Pod through the API server
  (a real watch, resumed from the last resourceVersion until the deadline) and returns once its
  ``Ready`` condition is ``True``.
* It raises ``PodFailed`` (a ``RuntimeError``) at once when the Pod can never become ready: it
  ended (``Failed``/``Succeeded``), its container terminated, or it waits for a reason that does
  not heal by itself (image not pullable or not present with ``imagePullPolicy: Never``, invalid
  image name, a container config the runtime refuses, a crash loop). At the deadline it raises
  ``TimeoutError`` naming the last state seen (e.g. ``Unschedulable: 0/1 nodes are available``).
  Both messages end with the Pod's events and its log tail.
* ``wait_endpoint_ready(core, namespace, name, port, deadline, exited)`` (``access="service"``)
  polls the Service's Endpoints (the endpoints controller of kube-controller-manager fills them)
  until they list the Pod ``name`` as a ready address on ``port``: what a client in the cluster
  needs before the Service URL answers. ``exited()`` (asked every second) raises or names why the
  Pod is gone; at the deadline a ``TimeoutError`` says what the Endpoints held.
* ``diagnostics(core, namespace, name)`` is that tail: the events of the Pod (oldest first, at
  most 15) and the last 50 log lines; it never raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["FATAL_WAITING", "PodFailed", "describe", "diagnostics", "endpoint_state", "pod_ready",
           "wait_endpoint_ready", "wait_scheduled_ready"]

#: Container ``waiting`` reasons that do not heal by themselves.
FATAL_WAITING = frozenset({
    "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError",
    "CreateContainerError", "RunContainerError", "CrashLoopBackOff", "PreCreateHookError", "PostStartHookError",
})


class PodFailed(RuntimeError):
    """The Pod can never become ready; the message has its state, events and log tail."""


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if obj is None:
            return None
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    return obj


def pod_ready(pod: Any) -> bool:
    for condition in _get(pod, "status", "conditions") or []:
        if _get(condition, "type") == "Ready":
            return bool(_get(condition, "status") == "True")
    return False


def describe(pod: Any) -> tuple[str, bool]:
    """A one-line state of the Pod and whether that state is final (it can never become ready)."""
    phase = _get(pod, "status", "phase") or "Unknown"
    for status in _get(pod, "status", "container_statuses") or []:
        waiting = _get(status, "state", "waiting")
        terminated = _get(status, "state", "terminated")
        if terminated is not None:
            reason = _get(terminated, "reason") or "Terminated"
            return (f"container {_get(status, 'name')} terminated ({reason}, exit code "
                    f"{_get(terminated, 'exit_code')}){_suffix(_get(terminated, 'message'))}", True)
        if waiting is not None:
            reason = _get(waiting, "reason") or "Waiting"
            return (f"container {_get(status, 'name')} waiting: {reason}{_suffix(_get(waiting, 'message'))}",
                    reason in FATAL_WAITING)
        if (_get(status, "restart_count") or 0) > 0:
            return f"container {_get(status, 'name')} restarted {_get(status, 'restart_count')} time(s)", True
    if phase in ("Failed", "Succeeded"):
        why = _suffix(_get(pod, "status", "reason")) + _suffix(_get(pod, "status", "message"))
        return f"Pod phase {phase}{why}", True
    for condition in _get(pod, "status", "conditions") or []:
        if _get(condition, "type") == "PodScheduled" and _get(condition, "status") != "True":
            return f"not scheduled: {_get(condition, 'reason')}{_suffix(_get(condition, 'message'))}", False
    return f"Pod phase {phase}", False


def _suffix(text: Any) -> str:
    return f": {str(text).strip()}" if text else ""


def diagnostics(core: Any, namespace: str, name: str) -> str:
    """The Pod's events and log tail, as text to append to an error message."""
    parts: list[str] = []
    try:
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}",
                                            _request_timeout=5).items
        events.sort(key=lambda e: str(_get(e, "last_timestamp") or _get(e, "event_time") or ""))
        lines = [f"  {e.type} {e.reason}: {(e.message or '').strip()}" for e in events[-15:]]
        parts.append("Events of the Pod:\n" + ("\n".join(lines) if lines else "  (none)"))
    except Exception as exc:
        parts.append(f"Events of the Pod could not be read: {type(exc).__name__}: {exc}")
    try:
        text = core.read_namespaced_pod_log(name, namespace, tail_lines=50, _request_timeout=5)
        text = (text or "").rstrip("\n")
        parts.append("Log tail of the Pod:\n" + (text if text else "  (empty)"))
    except Exception as exc:
        status = getattr(exc, "status", None)
        parts.append("Log tail of the Pod: (none: the container never started)" if status in (400, 404) else
                     f"Log tail of the Pod could not be read: {type(exc).__name__}: {exc}")
    return "\n" + "\n".join(parts)


def wait_scheduled_ready(core: Any, namespace: str, name: str, deadline: float) -> Any:
    """Watch the Pod until it is ready (returns it) or can never be (``PodFailed``/``TimeoutError``)."""
    from kubernetes import watch

    pod = core.read_namespaced_pod(name, namespace, _request_timeout=10)
    last, final = describe(pod)
    version = pod.metadata.resource_version
    while True:
        if pod_ready(pod):
            return pod
        if final:
            raise PodFailed(f"Pod {namespace}/{name} cannot become ready: {last}.{diagnostics(core, namespace, name)}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"Pod {namespace}/{name} not ready in time; last state: {last}. Raise "
                               f"LaunchSpec.startup_timeout_s if it is just slow.{diagnostics(core, namespace, name)}")
        w = watch.Watch()
        got_event = False
        try:
            for event in w.stream(core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                                  resource_version=version, timeout_seconds=max(1, int(remaining)),
                                  _request_timeout=remaining + 5):
                got_event = True
                obj = event["object"]
                if event["type"] == "DELETED":
                    raise PodFailed(f"Pod {namespace}/{name} was deleted during start-up (by someone else?)")
                if event["type"] == "ERROR":
                    break  # e.g. 410 Gone: re-read and watch again
                pod = obj
                version = pod.metadata.resource_version
                last, final = describe(pod)
                if pod_ready(pod) or final:
                    break
        finally:
            w.stop()
        if not got_event or (not pod_ready(pod) and not final):
            pod = core.read_namespaced_pod(name, namespace, _request_timeout=10)
            version = pod.metadata.resource_version
            last, final = describe(pod)


def endpoint_state(endpoints: Any, pod: str, port: int) -> tuple[bool, str]:
    """Whether ``endpoints`` list the Pod ``pod`` as a ready address on ``port``, and what they hold."""
    seen: list[str] = []
    for subset in _get(endpoints, "subsets") or []:
        ports = [_get(p, "port") for p in _get(subset, "ports") or []]
        for address in _get(subset, "addresses") or []:
            if _get(address, "target_ref", "name") == pod and port in ports:
                return True, f"ready {_get(address, 'ip')}:{port}"
            seen.append(f"ready {_get(address, 'target_ref', 'name')} on {ports}")
        seen += [f"not ready {_get(a, 'target_ref', 'name')}" for a in _get(subset, "not_ready_addresses") or []]
    return False, ", ".join(seen) or "no addresses"


def wait_endpoint_ready(core: Any, namespace: str, name: str, port: int, deadline: float,
                        exited: Callable[[], str | None]) -> Any:
    """Poll the Endpoints of the Service ``name`` until they list the Pod ``name`` ready on ``port``."""
    last = "no Endpoints object yet"
    checked = 0.0
    while True:
        try:
            endpoints = core.read_namespaced_endpoints(name, namespace, _request_timeout=10)
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise
        else:
            ready, last = endpoint_state(endpoints, name, port)
            if ready:
                return endpoints
        if time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            gone = exited()
            if gone is not None:
                raise PodFailed(f"Pod {namespace}/{name} {gone} while its Service waited for it")
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"the Service {namespace}/{name} never listed its Pod as a ready endpoint on port {port} "
                f"(Endpoints: {last}). They are filled by kube-controller-manager's endpoints controller: "
                "is it running? Raise LaunchSpec.startup_timeout_s if it is just slow.")
        time.sleep(0.25)
