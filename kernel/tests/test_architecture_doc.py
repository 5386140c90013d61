"""docs/architecture.md's kernel map names every kernel module, and only modules that exist.

Top-level modules are named ``openenv.<module>``; a package (a folder with ``__init__.py``) is
named by its folder, ``openenv.<package>``. Folders of data files (``scaffold``) count as packages.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
KERNEL = REPO / "kernel" / "src" / "openenv"

#: A row of the kernel map: | `openenv.x` | what it owns |
ROW = re.compile(r"^\| `(openenv(?:\.[A-Za-z_][A-Za-z0-9_]*)?)` \|", re.M)


def kernel_modules(root: Path = KERNEL) -> dict[str, str]:
    """``openenv.<name>`` -> the path it stands for (under kernel/src/openenv), for every module
    and package of the kernel."""
    found = {"openenv": "kernel/src/openenv/__init__.py"}
    for path in sorted(root.iterdir()):
        if path.name.startswith((".", "_")) and path.name != "__main__.py":
            continue
        if path.is_file() and path.suffix == ".py":
            found[f"openenv.{path.stem}"] = f"kernel/src/openenv/{path.name}"
        elif path.is_dir() and any(path.rglob("*")):
            found[f"openenv.{path.name}"] = f"kernel/src/openenv/{path.name}/"
    return found


def mapped(text: str) -> set[str]:
    return set(ROW.findall(text))


def drift(modules: dict[str, str], named: set[str]) -> list[str]:
    """What to fix in docs/architecture.md, one line each (empty when it is in step)."""
    missing = [f"  add a row for `{name}` ({modules[name]}): what rule or job it owns"
               for name in sorted(set(modules) - named)]
    stale = [f"  remove (or rename) the row for `{name}`: there is no kernel/src/openenv/"
             f"{name.removeprefix('openenv.').replace('.', '/')}(.py|/) any more"
             for name in sorted(named - set(modules))]
    return missing + stale


def test_every_kernel_module_is_on_the_architecture_page() -> None:
    problems = drift(kernel_modules(), mapped(DOC.read_text(encoding="utf-8")))
    assert not problems, ("docs/architecture.md's kernel map is out of step with kernel/src/openenv:\n"
                          + "\n".join(problems))


def test_the_check_reports_a_new_and_a_removed_module(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "tasks.py").write_text("")
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "__init__.py").write_text("")
    problems = drift(kernel_modules(tmp_path), {"openenv", "openenv.sessions", "openenv.wsguard"})
    assert problems == [
        "  add a row for `openenv.tasks` (kernel/src/openenv/tasks.py): what rule or job it owns",
        "  remove (or rename) the row for `openenv.wsguard`: there is no kernel/src/openenv/wsguard(.py|/) any more",
    ]


def test_the_map_rows_are_read_from_the_table() -> None:
    assert mapped("| `openenv.env` | x |\n| `openenv` | y |\nsee `openenv.nope` in prose\n") == {"openenv.env",
                                                                                                  "openenv"}
