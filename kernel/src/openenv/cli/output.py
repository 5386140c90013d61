"""The CLI's output style for plugin commands (``openenv_register_commands``), public.

A plugin command prints the way the kernel's own commands do: ``print_json(document)`` for
``--json`` (plain stdout, no markup), ``table(*columns)`` and ``console()`` for people, ``warn`` and
``fail(message, code)`` (``EXIT_USAGE`` for bad input, ``EXIT_ERROR`` for a failure doing the work)
for one ``error: ...`` line on stderr and the exit code. The implementation lives in the kernel's
private ``openenv.cli._output``; this module is the surface plugins may rely on.
"""

from __future__ import annotations

from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table, warn

__all__ = ["EXIT_ERROR", "EXIT_USAGE", "console", "fail", "print_json", "table", "warn"]
