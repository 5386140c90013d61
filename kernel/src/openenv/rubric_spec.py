"""Rubrics from text: ``NAME[=CONFIG]`` specs and ``build_rubric(name, config)`` (used by the server
for ``openenv serve --rubric`` and by ``openenv_rubrics``, which re-exports it).

``CONFIG`` is a JSON object (``exact_match={"expected": "4"}``) or ``k=v`` pairs separated by
commas (``numeric_match=expected=4,abs_tol=0.01``); in pairs each value is read as JSON when it
parses (numbers, ``true``, ``null``, ``[...]``) and as a plain string otherwise. Nested configs
(a composite's children) need the JSON form.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping
from typing import Any

from openenv.errors import ConfigError, did_you_mean
from openenv.rubric import Rubric

__all__ = ["accepted_options", "build_rubric", "parse_config", "parse_spec", "rubric_from_spec"]

_NAME = re.compile(r"[A-Za-z0-9_.-]+")


def parse_config(text: str) -> dict[str, Any]:
    """Parse CONFIG text (JSON object or ``k=v,k=v``) into a dict."""
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"rubric config {text!r} is not valid JSON: {exc.msg} at column {exc.colno}.") from None
        if not isinstance(value, dict):
            raise ConfigError(f"rubric config must be a JSON object, got {text!r}.")
        return value
    config: dict[str, Any] = {}
    for pair in text.split(","):
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise ConfigError(f"rubric config item {pair!r} is not 'key=value'. Write k=v,k=v or a JSON object "
                              "(use JSON when a value contains a comma).")
        if key in config:
            raise ConfigError(f"rubric config sets '{key}' twice.")
        raw = raw.strip()
        try:
            config[key] = json.loads(raw)
        except json.JSONDecodeError:
            config[key] = raw
    return config


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split ``NAME[=CONFIG]`` into the rubric name and its config dict."""
    name, _, rest = spec.partition("=")
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise ConfigError(f"rubric spec {spec!r} must start with a rubric name, e.g. 'exact_match' or "
                          "'exact_match={\"expected\": \"4\"}'.")
    return name, parse_config(rest)


def accepted_options(factory: Any) -> list[str]:
    """The keyword options a rubric class (and its bases) accepts."""
    names: list[str] = []
    classes = factory.__mro__ if isinstance(factory, type) else [factory]
    for klass in classes:
        init = klass.__dict__.get("__init__") if isinstance(factory, type) else klass
        if init is None or init is object.__init__:
            continue
        for p in list(inspect.signature(init).parameters.values())[1 if isinstance(factory, type) else 0:]:
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in names:
                names.append(p.name)
    return names


def build_rubric(name: str, config: Mapping[str, Any] | None = None, *, catalog: Any = None) -> Rubric:
    """Build the registered rubric ``name`` with ``config`` (keyword options).

    Unknown names raise ``UnknownNameError`` (with "did you mean"); unknown or bad options raise
    ``ConfigError`` listing what the rubric accepts.
    """
    if catalog is None:
        from openenv.plugins import get_plugin_manager

        catalog = get_plugin_manager().catalog
    entry = catalog.rubrics.get(name)
    factory = entry.load()
    options = dict(config or {})
    accepted = accepted_options(factory)
    for key in options:
        if key not in accepted:
            raise ConfigError(f"rubric '{name}' has no option '{key}'.{did_you_mean(key, accepted)} "
                              f"Options: {', '.join(accepted)}.")
    if "name" in accepted:
        options.setdefault("name", name)  # the component name defaults to the registry name
    try:
        rubric = factory(**options)
    except TypeError as exc:
        raise ConfigError(f"rubric '{name}': {exc}. Options: {', '.join(accepted)}.") from None
    if not isinstance(rubric, Rubric):
        raise ConfigError(f"rubric '{name}' (from plugin '{entry.plugin}') built a {type(rubric).__name__}, "
                          "not an openenv.rubric.Rubric.")
    return rubric


def rubric_from_spec(spec: str, *, catalog: Any = None) -> Rubric:
    """``build_rubric(*parse_spec(spec))``: the form ``openenv serve --rubric NAME[=CONFIG]`` uses."""
    name, config = parse_spec(spec)
    return build_rubric(name, config, catalog=catalog)
