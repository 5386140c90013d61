"""OpenEnv ``/web``: a self-contained page to play any served env by hand (see README.md)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
