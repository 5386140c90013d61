"""Plugin hooks of openenv-provider-local."""

from __future__ import annotations
