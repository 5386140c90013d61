"""Plugin hooks of openenv-env-echo."""

from __future__ import annotations
