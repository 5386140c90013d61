"""docs/hooks.md documents every hook with its exact signature, and every event field."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path

import pluggy
import pytest

from openenv import events, hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


def _hookspecs() -> dict[str, object]:
    pm = pluggy.PluginManager("openenv")
    return {name: getattr(hookspecs, name) for name in dir(hookspecs)
            if pm.parse_hookspec_opts(hookspecs, name)}


def signature_line(function: object) -> str:
    """``def name(arg: Type, ...) -> Type`` as written in the source (annotations unevaluated)."""
    sig = inspect.signature(function)  # type: ignore[arg-type]
    params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
    return f"def {function.__name__}({params}) -> {sig.return_annotation}"  # type: ignore[attr-defined]


def _documented_defs(text: str) -> dict[str, str]:
    """Each hook's reference line: the first ``def openenv_...`` line naming it (examples follow)."""
    found: dict[str, str] = {}
    for m in re.finditer(r"^def (openenv_\w+)\(.*$", text, flags=re.MULTILINE):
        found.setdefault(m.group(1), m.group(0).strip())
    return found


def test_there_are_hooks_to_document() -> None:
    assert len(_hookspecs()) >= 10


@pytest.mark.parametrize("name", sorted(_hookspecs()))
def test_each_hook_is_documented_with_its_exact_signature(name: str) -> None:
    documented = _documented_defs(DOC.read_text(encoding="utf-8"))
    assert name in documented, f"docs/hooks.md does not document the hook {name}"
    assert documented[name] == signature_line(_hookspecs()[name]), (
        f"docs/hooks.md documents {name} with a signature that differs from openenv/hookspecs.py")


def test_the_doc_names_no_hook_that_does_not_exist() -> None:
    stale = set(_documented_defs(DOC.read_text(encoding="utf-8"))) - set(_hookspecs())
    assert not stale, f"docs/hooks.md documents hooks that are not in hookspecs.py: {sorted(stale)}"


@pytest.mark.parametrize("event", sorted(events.EVENT_TYPES.values(), key=lambda t: t.__name__),
                         ids=lambda t: t.__name__)
def test_each_event_field_is_documented_with_its_type(event: type) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"`{event.__name__}`" in text
    for field in dataclasses.fields(event):
        assert re.search(rf"^{field.name}: {re.escape(str(field.type))}\s", text, re.MULTILINE), (
            f"docs/hooks.md does not document {event.__name__}.{field.name}: {field.type}")


def test_the_signature_line_sees_a_changed_signature() -> None:
    def openenv_register_envs(registry: int, extra: str) -> None: ...

    assert signature_line(openenv_register_envs) == (
        "def openenv_register_envs(registry: int, extra: str) -> None")
    assert signature_line(openenv_register_envs) != signature_line(
        _hookspecs()["openenv_register_envs"])
