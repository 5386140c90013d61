"""Plugin hooks of openenv-transport-rest."""

from __future__ import annotations
