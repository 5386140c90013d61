"""Kubernetes provider for OpenEnv (``openenvkit-provider-kubernetes``)."""

from __future__ import annotations

__all__: list[str] = []
