"""What a registered object must be, per kind, checked when an entry is first loaded.

A wrong registration (an instance instead of a class, an ``Action`` class registered as an env,
a class that is not a ``Provider`` registered as a provider…) fails at load with a ``PluginError``
that says what was found, what was expected, and how to fix the registration, instead of failing
later, far away, with an ``AttributeError``.

* env: an ``openenv.Environment`` subclass, or a function callable with no arguments that
  builds one (called once per session).
* transport: a concrete ``openenv.interfaces.ServerTransport`` subclass; its ``client`` a concrete
  ``ClientConnector`` subclass with a non-empty ``schemes`` ClassVar.
* provider: a concrete ``openenv.interfaces.Provider`` subclass.
* rubric: an ``openenv.rubric.Rubric`` subclass (``openenv.interfaces.Rubric`` is the same class).
* command: a ``typer.Typer`` app or a plain function.
"""

from __future__ import annotations

import inspect
from typing import Any, NoReturn

from openenv.errors import PluginError

__all__ = ["KindError", "check", "check_connector", "describe"]


class KindError(PluginError):
    """A registered object is not of the kind it was registered as (the message says the fix)."""


def describe(obj: Any) -> str:
    """A short description of ``obj`` for messages: class (and bases), function or instance."""
    if isinstance(obj, type):
        bases = [b.__name__ for b in obj.__mro__[1:] if b is not object][:3]
        text = f"the class {obj.__module__}.{obj.__qualname__}"
        return text + (f" (a subclass of {', '.join(bases)})" if bases else "")
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return f"the function {obj.__module__}.{obj.__qualname__}"
    return f"an instance of {type(obj).__module__}.{type(obj).__qualname__}"


def _refuse(label: str, ref: str, obj: Any, expected: str, fix: str) -> NoReturn:
    raise KindError(f"{label} is registered as {ref}, which is {describe(obj)}; expected "
                      f"{expected}. {fix}")


def _concrete(label: str, ref: str, cls: type, expected: str) -> None:
    missing = sorted(getattr(cls, "__abstractmethods__", ()))
    if not missing:
        return
    raise KindError(f"{label} is registered as {ref}, a {expected} that does not implement "
                      f"{', '.join(missing)}. Implement every abstract method.")


def check(kind: str, obj: Any, label: str, ref: str) -> None:
    """Raise ``PluginError`` unless ``obj`` is something a ``kind`` entry may name."""
    checker = _CHECKS.get(kind)
    if checker is not None:
        checker(obj, label, ref)


def _check_env(obj: Any, label: str, ref: str) -> None:
    from openenv.env import Environment
    from openenv.types import Action, Observation, State

    expected = "an openenv.Environment subclass or a zero-argument factory function"
    if isinstance(obj, type):
        if issubclass(obj, Environment):
            return
        role = next((t.__name__ for t in (Action, Observation, State) if issubclass(obj, t)), None)
        fix = (f"That is an {role} model, not the env: register the Environment subclass whose "
               f"step/reset use it." if role else "Register the Environment subclass (e.g. "
               "'my_pkg.env:MyEnv') or a function that returns one.")
        _refuse(label, ref, obj, expected, fix)
    if isinstance(obj, Environment):
        _refuse(label, ref, obj, expected, "Register the class itself (each session gets its own "
                "instance), or a zero-argument function that builds one.")
    if not callable(obj):
        _refuse(label, ref, obj, expected, "Point the reference at the Environment subclass.")
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return  # a builtin callable: nothing to inspect
    needed = [p.name for p in sig.parameters.values() if p.default is p.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        _refuse(label, ref, obj, expected, f"The factory needs the argument(s) {', '.join(needed)}, "
                "but it is called with none (once per session): give them defaults.")


def _check_class(base_name: str, expected: str) -> Any:
    def checker(obj: Any, label: str, ref: str) -> None:
        from openenv import interfaces

        base = getattr(interfaces, base_name)
        if isinstance(obj, type) and issubclass(obj, base):
            _concrete(label, ref, obj, expected)
            return
        fix = ("Register the class itself, not an instance of it (the kernel builds instances)."
               if isinstance(obj, base) else f"Subclass openenv.interfaces.{base_name} and "
               "register that class ('my_pkg.module:MyClass').")
        _refuse(label, ref, obj, expected, fix)

    return checker


def check_connector(obj: Any, label: str, ref: str) -> None:
    """A transport's ``client``: a concrete ``ClientConnector`` subclass that names its schemes."""
    _check_class("ClientConnector", "an openenv.interfaces.ClientConnector subclass")(obj, label, ref)
    schemes = getattr(obj, "schemes", ())
    if not schemes or isinstance(schemes, str) or not all(isinstance(s, str) and s for s in schemes):
        raise KindError(f"{label} is registered as {ref}, whose `schemes` ClassVar is "
                          f"{schemes!r}; declare the URL schemes it connects to, e.g. "
                          "schemes = (\"ws\", \"wss\").")


def _check_command(obj: Any, label: str, ref: str) -> None:
    try:
        from typer import Typer
    except ImportError:  # pragma: no cover - the CLI, the only loader of commands, needs typer
        Typer = ()  # type: ignore[assignment,misc]
    if isinstance(obj, Typer) or inspect.isfunction(obj):
        return
    _refuse(label, ref, obj, "a typer.Typer app or a function", "Register the Typer app object "
            "('my_pkg.cli:app') or the command function.")


_CHECKS = {
    "env": _check_env,
    "transport": _check_class("ServerTransport", "an openenv.interfaces.ServerTransport subclass"),
    "provider": _check_class("Provider", "an openenv.interfaces.Provider subclass"),
    "rubric": _check_class("Rubric", "an openenv.rubric.Rubric subclass"),
    "command": _check_command,
}
