"""Per-parameter descriptions from a tool's docstring (Google ``Args:`` or Sphinx ``:param:``)."""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]


_SECTION_RE = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Yields|"
    r"Raises|Examples?|Notes?|Warnings?|See Also|Attributes|Todo):\s*$"
)
_ARG_RE = re.compile(r"^(\*{0,2}[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_RE = re.compile(r"^:param\s+(?:[^:]*\s)?([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into (description, {parameter: description}).

    Google style (``Args:`` with indented ``name (type): text`` entries, continuation lines
    indented deeper) and Sphinx ``:param name: text`` lines are understood. The description is the
    text before the first section.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    base_indent: int | None = None
    for line in lines:
        stripped = line.strip()
        sphinx = _SPHINX_RE.match(stripped)
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            section = "sphinx"
            continue
        head = _SECTION_RE.match(stripped)
        if head and (len(line) - len(line.lstrip())) == 0:
            section, current, base_indent = head.group(1), None, None
            continue
        if section is None:
            desc.append(line)
            continue
        if section in ("Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"):
            if not stripped:
                current = None
                continue
            indent = len(line) - len(line.lstrip())
            if base_indent is None:
                base_indent = indent
            match = _ARG_RE.match(stripped)
            if match and indent <= base_indent:
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current is not None:
                params[current] = (params[current] + " " + stripped).strip()
        elif section == "sphinx" and current is not None and stripped and not stripped.startswith(":"):
            params[current] = (params[current] + " " + stripped).strip()
    return "\n".join(desc).strip(), params

