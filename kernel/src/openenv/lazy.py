"""Lazy exports for a package's ``__init__``: names are imported on first use (``openenv.lazy``).

A plugin's hook module imports its package, and ``openenv --help`` / ``plugins list`` import every
hook module: a package ``__init__`` that imported its env (and the env's SDK) eagerly would make all
of them slow. One helper does what every package used to write by hand (as scientific-python's
``lazy_loader`` does)::

    from typing import TYPE_CHECKING

    from openenv.lazy import lazy_exports

    if TYPE_CHECKING:  # what type checkers and IDEs see
        from openenv_env_maze.env import MazeEnv

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"MazeEnv": ".env"})

Each exported name maps to the module that defines it (absolute, or relative to the package like
``".env"``); the value is looked up there on first access and cached in the package's namespace, so
later accesses are plain attribute reads.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str], *, also: Iterable[str] = (),
                 fallback: Callable[[str], Any] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for module ``package`` (pass ``__name__``).

    ``exports`` maps each public name to the module it lives in; ``also`` adds names to ``__all__``
    that the module defines itself (``__version__``); ``fallback(name)`` is asked for a name that
    is not exported (it returns a value or raises ``AttributeError``), e.g. to refuse a removed API
    with a message that names its replacement.
    """
    targets = dict(exports)
    public = sorted(targets) + [name for name in also if name not in targets]

    def __getattr__(name: str) -> Any:
        target = targets.get(name)
        if target is None:
            if fallback is not None:
                return fallback(name)
            close = difflib.get_close_matches(name, public, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise AttributeError(f"module {package!r} has no attribute {name!r}.{hint}")
        module = importlib.import_module(target, package if target.startswith(".") else None)
        try:
            value = getattr(module, name)
        except AttributeError:
            # A wrong mapping is the package's bug, not the caller's: say which entry is wrong.
            raise AttributeError(f"{package}: lazy export {name!r} is mapped to {module.__name__!r}, "
                                 f"which does not define it (fix the mapping passed to lazy_exports)") from None
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return __getattr__, __dir__, public
