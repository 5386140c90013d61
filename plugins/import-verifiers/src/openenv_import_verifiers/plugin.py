"""Plugin hooks of openenvkit-import-verifiers: the ``openenv import`` command and the
``verifiers_rewards`` rubric (lazy references: listing plugins never imports verifiers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import CommandRegistry, RubricRegistry

__all__ = ["openenv_register_commands", "openenv_register_rubrics"]


@hookimpl
def openenv_register_commands(registry: CommandRegistry) -> None:
    """Register ``openenv import``."""
    registry.register(
        "import", "openenv_import_verifiers.cli:import_cmd",
        description="Generate an env package that serves a verifiers taskset (verifiers:<module>) or an ORS "
                    "environment (ors:PATH_OR_MODULE) over our protocol.",
    )


@hookimpl
def openenv_register_rubrics(registry: RubricRegistry) -> None:
    """Register ``verifiers_rewards`` (the rubric every imported env's manifest names)."""
    registry.register("verifiers_rewards", "openenv_import_verifiers.rubric:VerifiersRewards",
                      description="An imported verifiers env's score, its named rewards as reward components.")
