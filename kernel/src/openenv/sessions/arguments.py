"""The argument rules of ``reset`` and ``step``, one of each, for every transport.

**Reset** (docs/protocol.md §3.3, §11 B21): ``seed`` (an integer >= 0) and ``episode_id`` (a string of at most
255 characters) are validated the same way on every transport; keys ``reset`` does not take are
dropped for upstream compatibility (logged once per key) unless it takes ``**kwargs``.

**Step** (docs/protocol.md §11 B2, §12 "Step arguments"):

A transport that carries step keyword arguments (WebSocket ``kwargs`` after negotiation, the
HTTP ``/step`` body keys beside ``action``) hands them to ``SessionManager.step``, which checks them
here against the env class's ``step`` signature (built once per server, never per request):

* a name ``step`` declares is validated (and coerced) against its annotation, so
  ``{"timeout_s": "x"}`` is a ``VALIDATION_ERROR`` instead of an exception inside the env;
* a name ``step`` does not declare is refused (``extra_forbidden``) unless ``step`` takes
  ``**kwargs`` — except upstream's own step-request fields ``timeout_s`` and ``request_id``, which
  upstream clients send with every HTTP step: those are dropped when ``step`` does not take them,
  as upstream does;
* the action parameter's own name is always refused;
* only the names the caller sent are passed on, so the env's defaults still apply.

When the env class is unknown (a factory without a return annotation) names cannot be checked and
every argument is passed through.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model
from pydantic import ValidationError as PydanticValidationError

from openenv.errors import ValidationError
from openenv.sessions.session import signature_params
from openenv.wire import validation_errors

__all__ = ["UPSTREAM_STEP_FIELDS", "ResetArgsPolicy", "StepKwargsPolicy"]

log = logging.getLogger("openenv.sessions")

#: Step-request fields upstream's HTTP clients always send; dropped when ``step`` does not take them.
UPSTREAM_STEP_FIELDS = frozenset({"timeout_s", "request_id"})

_MAX_EPISODE_ID = 255


def _extra_forbidden(loc: list[Any], value: Any) -> dict[str, Any]:
    return {"type": "extra_forbidden", "loc": loc, "msg": "Extra inputs are not permitted", "input": value}


class StepKwargsPolicy:
    """Checks step keyword arguments for one env class; call it with the arguments."""

    def __init__(self, env_class: type | None, *, is_async: bool) -> None:
        self._model: type[BaseModel] | None = None
        self._forbidden: frozenset[str] = frozenset()
        self._droppable: frozenset[str] = frozenset()
        self._warned: set[str] = set()
        fn = getattr(env_class, "step_async" if is_async else "step", None) if env_class else None
        if fn is None:
            return
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward references: validate names only
            hints = {}
        params = [p for p in sig.parameters.values() if p.name != "self"]
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        action_name = positional[0].name if positional else "action"
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        fields: dict[str, Any] = {}
        for p in params:
            if p.name == action_name or p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                continue
            default = ... if p.default is p.empty else p.default
            fields[p.name] = (hints.get(p.name, Any), default)
        self._forbidden = frozenset({action_name})
        self._droppable = frozenset() if var_kw else UPSTREAM_STEP_FIELDS - fields.keys()
        self._model = create_model(  # type: ignore[call-overload]
            "StepKwargs",
            __config__=ConfigDict(extra="allow" if var_kw else "forbid", arbitrary_types_allowed=True),
            **fields,
        )

    def __call__(self, kwargs: dict[str, Any], loc: Sequence[Any] = ("kwargs",)) -> dict[str, Any]:
        """The keyword arguments to pass to ``step``; ``ValidationError`` if they do not fit.

        ``loc`` prefixes each error's location (``["kwargs", name]`` on the WebSocket, where the
        arguments travel in a ``kwargs`` object; ``["body", name]`` over HTTP).
        """
        if not kwargs:
            return kwargs
        clash = [k for k in kwargs if k in self._forbidden]
        if clash:
            raise ValidationError("Invalid message", data={
                "errors": [_extra_forbidden([*loc, k], kwargs[k]) for k in clash]})
        if self._model is None:
            return kwargs
        if self._droppable and not self._droppable.isdisjoint(kwargs):
            kwargs = self._drop_upstream_fields(kwargs)
            if not kwargs:
                return kwargs
        try:
            model = self._model.model_validate(kwargs)
        except PydanticValidationError as exc:
            raise ValidationError(
                "Invalid message", data={"errors": validation_errors(exc, tuple(loc))}) from None
        # Attribute access (not model_dump) keeps model-typed arguments as model instances.
        out = {name: getattr(model, name) for name in model.model_fields_set}
        if model.model_extra:
            out.update(model.model_extra)
        return out

    def _drop_upstream_fields(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kept = {}
        for key, value in kwargs.items():
            if key not in self._droppable:
                kept[key] = value
            elif key not in self._warned:
                self._warned.add(key)
                log.info("step argument %r is not accepted by the env's step; dropped", key)
        return kept


class ResetArgsPolicy:
    """Checks the data of a ``reset`` for one env class; call it with the data, get the kwargs."""

    def __init__(self, env_class: type | None, *, is_async: bool, env_name: str = "env") -> None:
        self._params, self._var_kw = signature_params(env_class, "reset_async" if is_async else "reset")
        self._env_name = env_name
        self._warned: set[str] = set()

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        errors = []
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            if isinstance(seed, int) and not isinstance(seed, bool):
                errors.append({"type": "greater_than_equal", "loc": ["seed"], "msg":
                               "Input should be greater than or equal to 0", "input": seed, "ctx": {"ge": 0}})
            else:
                errors.append({"type": "int_type", "loc": ["seed"], "msg":
                               "Input should be a valid integer", "input": seed})
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > _MAX_EPISODE_ID):
            errors.append({"type": "string_type" if not isinstance(episode_id, str) else "string_too_long",
                           "loc": ["episode_id"], "msg": "Input should be a string of at most 255 characters",
                           "input": episode_id})
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        if self._var_kw:
            return data
        kwargs = {}
        for key, value in data.items():
            if key in self._params:
                kwargs[key] = value
            elif key not in self._warned:
                self._warned.add(key)
                log.info("reset argument %r is not accepted by %s.reset; dropped", key, self._env_name)
        return kwargs
