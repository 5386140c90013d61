"""Plugin hooks of openenvkit-catalog: four command groups, registered by lazy reference so that
``openenv --help`` imports none of them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import CommandRegistry

__all__ = ["openenv_register_commands"]


@hookimpl
def openenv_register_commands(registry: CommandRegistry) -> None:
    """Register ``catalog``, ``discover``, ``fork`` and ``skills``."""
    registry.register("catalog", "openenv_catalog.cli_catalog:app",
                      description="Build a versioned, metadata-only catalog of envs from a repository's committed "
                                  "manifests; inspect one.")
    registry.register("discover", "openenv_catalog.cli_catalog:discover",
                      description="Search catalogs (files or URLs) and installed envs; say how to get the others.")
    registry.register("fork", "openenv_catalog.fork:fork",
                      description="Copy a published env (a Hugging Face Space or an OCI image) under a new name.")
    registry.register("skills", "openenv_catalog.skills:app",
                      description="Write a skill file that teaches AI coding assistants this CLI.")
