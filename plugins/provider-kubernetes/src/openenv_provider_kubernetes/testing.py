"""Helpers for tests that run env servers on a real cluster (this package's and other plugins').

``create_ready_namespace(core, name)`` creates a namespace that accepts Pods at once. The API server
refuses Pods in a namespace until its ``default`` ServiceAccount exists, which the
controller-manager creates a moment after the namespace; on a loaded one-node cluster, or right
after the API server restarted (the controller's watch backs off), that can take longer than any
fixed wait. So the helper waits briefly for the controller, then creates the account itself (a
409, the controller winning the race, is fine).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["create_ready_namespace"]


def create_ready_namespace(core: Any, name: str, *, wait_s: float = 10.0) -> str:
    """Create namespace ``name`` with its ``default`` ServiceAccount; return ``name``."""
    core.create_namespace({"metadata": {"name": name}})
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items):
            return name
        time.sleep(0.2)
    try:
        core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    except Exception as exc:
        if getattr(exc, "status", None) != 409:  # 409: the controller made it meanwhile
            raise
    return name
