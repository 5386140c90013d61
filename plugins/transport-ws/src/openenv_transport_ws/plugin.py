"""Plugin hooks of openenv-transport-ws."""

from __future__ import annotations
