"""A scripted solver for a handful of simple MiniWoB tasks, and a random baseline.

Both read only the observation (its dict or model) and answer an action dict, as an agent would:
the solver parses the utterance and picks elements of the element list by tag, text and id, then
acts through the public commands (click by ref, type by ref). It solves ``SOLVED_TASKS`` (tested:
reward > 0 on every seed tried) and is the manifest's oracle for ``openenv validate``, which plays
the default task, click-button.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from openenv_env_miniwob.models import MiniWoBObservation

__all__ = ["SOLVED_TASKS", "random_policy", "scripted_solver"]

#: The tasks ``scripted_solver`` solves.
SOLVED_TASKS = ("click-button", "click-link", "click-test", "click-test-2", "enter-password", "enter-text",
                "focus-text")
_QUOTED = re.compile(r'"([^"]+)"')
_NOOP = {"command": {"kind": "noop"}}


def _data(obs: MiniWoBObservation | Mapping[str, Any]) -> Mapping[str, Any]:
    return obs.model_dump() if isinstance(obs, MiniWoBObservation) else obs


def _click(ref: int) -> dict[str, Any]:
    return {"command": {"kind": "click", "ref": ref}}


def _first(elements: list[Mapping[str, Any]], **want: Any) -> Mapping[str, Any] | None:
    return next((e for e in elements if all(e.get(k) == v for k, v in want.items())), None)


def _fill_then_submit(elements: list[Mapping[str, Any]], text: str, tags: tuple[str, ...]) -> dict[str, Any]:
    for e in elements:  # every field not yet holding the text: type it (fields start empty)
        if e["tag"] in tags and e.get("value") != text:
            return {"command": {"kind": "type", "ref": e["ref"], "text": text}}
    submit = _first(elements, id="subbtn")
    return _click(submit["ref"]) if submit else _NOOP


def scripted_solver(obs: MiniWoBObservation | Mapping[str, Any]) -> dict[str, Any]:
    """The next action for one of ``SOLVED_TASKS``; a noop when it sees nothing to do, as on every
    other task (so it can drive any task, e.g. to replay one identically across a group)."""
    data = _data(obs)
    task, utterance = data.get("task", ""), data.get("utterance", "")
    elements: list[Mapping[str, Any]] = list(data.get("elements", []))
    quoted = _QUOTED.findall(utterance)
    target: Mapping[str, Any] | None = None
    if task == "click-button" and quoted:
        target = _first(elements, tag="button", text=quoted[0])
    elif task == "click-link" and quoted:
        target = next((e for e in elements if e["text"] == quoted[0] and "alink" in e.get("classes", "")), None)
    elif task == "click-test":
        target = _first(elements, tag="button")
    elif task == "click-test-2":
        word = utterance.rstrip(".").split()[-1] if utterance else ""
        target = _first(elements, tag="button", text=word)
    elif task == "focus-text":
        target = _first(elements, tag="input_text")
    elif task == "enter-text" and quoted:
        return _fill_then_submit(elements, quoted[0], ("input_text",))
    elif task == "enter-password" and quoted:
        return _fill_then_submit(elements, quoted[0], ("input_password",))
    return _click(target["ref"]) if target else _NOOP


def random_policy(obs: MiniWoBObservation | Mapping[str, Any], rng: random.Random | None = None) -> dict[str, Any]:
    """A click on a uniformly random visible element (a baseline for any task)."""
    elements = list(_data(obs).get("elements", []))
    if not elements:
        return dict(_NOOP)
    return _click((rng or random).choice(elements)["ref"])
