"""Plugin hooks of openenv-env-grid-world."""

from __future__ import annotations
