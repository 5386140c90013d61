"""Output helpers shared by the command groups: one JSON style, one table style, one error style.

JSON goes to stdout through ``typer.echo`` (never through rich, which would add markup or wrap
lines); tables and messages use rich. Errors go to stderr as ``error: <message>`` lines.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "console", "fail", "print_json", "table", "warn"]

#: Exit code for a failure while doing the work (a provider raising, a broken plugin in strict mode).
EXIT_ERROR = 1
#: Exit code for bad input: an unknown name, a bad option (same as click's usage errors).
EXIT_USAGE = 2


def print_json(document: Any) -> None:
    """Print ``document`` as indented JSON on stdout (keys kept in the order built)."""
    typer.echo(json.dumps(document, indent=2, default=str))


def console(*, stderr: bool = False) -> Console:
    """A rich console bound to the current stdout/stderr (so test runners capture it)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def table(*columns: str, title: str | None = None, caption: str | None = None) -> Table:
    """A table in the CLI's house style."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
              caption_justify="left")
    for col in columns:
        t.add_column(col, overflow="fold")
    return t


def warn(message: str) -> None:
    """Print ``warning: <message>`` on stderr."""
    typer.echo(f"warning: {message}", err=True)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
