"""placeholder"""
from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``openenv push`` to ``app``."""
