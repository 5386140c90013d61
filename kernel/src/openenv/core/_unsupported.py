"""How the compatibility layer refuses what it deliberately does not provide.

Every refusal is an ``UnsupportedFeature``: it says what is not supported, why, and what to use
instead. It is both an ``ImportError`` (so ``from openenv.core.x import Y`` fails the way a missing
optional dependency would, and ``try/except ImportError`` fallbacks in env code keep working) and a
``NotImplementedError`` (so calling an unsupported method fails the usual way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["DOCS", "UnsupportedFeature", "module_getattr", "refuse", "unsupported_callable"]

#: Where the differences are explained.
DOCS = "docs/coming-from-openenv.md"


class UnsupportedFeature(ImportError, NotImplementedError):
    """An upstream OpenEnv feature that this OpenEnv deliberately does not provide."""

    def __init__(self, feature: str, alternative: str, why: str = "") -> None:
        self.feature, self.alternative, self.why = feature, alternative, why
        reason = f" {why.rstrip('.')}." if why else ""
        super().__init__(
            f"{feature} is not supported by this OpenEnv.{reason} Instead: {alternative} "
            f"(see {DOCS})."
        )

    def __str__(self) -> str:  # ImportError's str() would show only ``msg``; keep the full text
        return str(self.args[0])


def refuse(feature: str, alternative: str, why: str = "") -> NoReturn:
    """Raise ``UnsupportedFeature``."""
    raise UnsupportedFeature(feature, alternative, why)


def unsupported_callable(feature: str, alternative: str, why: str = "") -> Callable[..., NoReturn]:
    """A stand-in for an unsupported function or class: calling it raises ``UnsupportedFeature``.

    It is a class, so that code which subclasses the unsupported class (or names it in an
    annotation) still imports; only building an instance, or calling it, fails.
    """

    def __new__(cls: type, *_args: Any, **_kwargs: Any) -> NoReturn:
        refuse(feature, alternative, why)

    name = feature.rsplit(".", 1)[-1].strip("`()")
    stand_in = type(name, (), {"__new__": __new__, "__doc__": f"Not supported: {alternative}",
                               "__openenv_unsupported__": feature})
    return stand_in


def module_getattr(module: str, refused: dict[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` giving stand-ins for the names in ``refused`` (name → (alternative, why)).

    Importing such a name works (an ``app.py`` importing it next to supported names keeps loading);
    using it raises ``UnsupportedFeature``.
    """

    def __getattr__(name: str) -> Any:
        if name in refused:
            alternative, why = refused[name]
            return unsupported_callable(f"`{module}.{name}`", alternative, why)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
