"""The root command's own options: ``--version`` (with ``-v``/``--verbose``) and help without a command."""

from __future__ import annotations

from typing import Annotated

import typer

__all__ = ["root"]


def root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="With --version: list the plugin distributions.")] = False,
) -> None:
    from openenv.cli.main import version_text

    if version:
        typer.echo(version_text(verbose=verbose))
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()
