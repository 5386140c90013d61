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


#: The narrowest a prose column (a description, a detail, a fix) gets, so that the words in it
#: (an error code such as EXECUTION_ERROR, a path) are wrapped between words, not cut inside one.
PROSE_MIN_WIDTH = 12


def table(*columns: str, title: str | None = None, caption: str | None = None,
          identifiers: tuple[str, ...] = (), optional: tuple[str, ...] = ()) -> Table:
    """A table in the CLI's house style.

    ``identifiers`` name the columns that hold names a reader copies (an env, a reference, a check):
    they are never wrapped or cut, each as wide as its longest cell; the other columns are prose and
    wrap between words to fit the terminal. When the identifiers and the narrowest prose columns do
    not fit the terminal, the ``optional`` columns are left out (first named first) and the caption
    says which, rather than cutting a name in two."""
    from rich import box
    from rich.table import Table

    unknown = (set(identifiers) | set(optional)) - set(columns)
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not columns of the table {list(columns)}")

    def make(names: list[str], note: str | None, optional: tuple[str, ...]) -> Table:
        return _Table(title=title, caption=note, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                      caption_justify="left", names=names, identifiers=identifiers, optional=optional)

    class _Table(Table):
        def __init__(self, *, names: list[str], identifiers: tuple[str, ...], optional: tuple[str, ...],
                     **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._optional = optional
            for col in names:
                if col in identifiers:
                    self.add_column(col, no_wrap=True, min_width=len(col))
                else:
                    self.add_column(col, overflow="fold", min_width=min(PROSE_MIN_WIDTH, max(len(col), 8)))

        def add_row(self, *cells: Any, **kwargs: Any) -> None:
            from rich.text import Text

            for column, cell in zip(self.columns, cells, strict=False):
                if column.no_wrap and isinstance(cell, str):
                    width = max((Text.from_markup(line).cell_len for line in cell.splitlines()), default=0)
                    column.min_width = max(column.min_width or 0, width)
            super().add_row(*cells, **kwargs)

        def _needed(self, names: list[str]) -> int:
            cols = [c for c in self.columns if c.header in names]
            return sum((c.min_width or 0) + 2 for c in cols)

        def __rich_console__(self, console: Any, options: Any) -> Any:
            names = [str(c.header) for c in self.columns]
            dropped = []
            for name in self._optional:
                if self._needed(names) <= options.max_width:
                    break
                names.remove(name)
                dropped.append(name)
            if not dropped:
                yield from super().__rich_console__(console, options)
                return
            note = (f"{caption}\n" if caption else "") + (
                f"({', '.join(dropped)} left out to fit {options.max_width} columns: widen the terminal "
                "or use --json)")
            narrow = make(names, note, ())  # nothing more to leave out: it was fitted here
            keep = [i for i, c in enumerate(self.columns) if str(c.header) in names]
            for row in range(self.row_count):
                narrow.add_row(*(self.columns[i]._cells[row] for i in keep))
            yield from narrow.__rich_console__(console, options)

    return make(list(columns), caption, optional)


def warn(message: str) -> None:
    """Print ``warning: <message>`` on stderr."""
    typer.echo(f"warning: {message}", err=True)


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with ``code``."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)
