"""OpenEnv ``serve`` hardened on uvicorn (see README.md): chosen by ``openenv serve`` through the
``openenv_make_server`` decision hook when this package is installed."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
