"""Validation of negotiated step keyword arguments (docs/protocol.md §11 B2, §12 "Step arguments").

Once a client negotiated ``step_kwargs``, a ``step`` frame may carry ``"kwargs": {...}``. They are
checked against the env's ``step`` signature, built once per server (never per frame):

* a name ``step`` does not declare is refused (``extra_forbidden`` at ``["kwargs", <name>]``)
  unless ``step`` takes ``**kwargs``; the action parameter's own name is always refused;
* declared parameters are validated (and coerced) against their annotations, so
  ``{"timeout_s": "x"}`` is a ``VALIDATION_ERROR`` instead of an exception inside the env;
* only the names the client sent are passed on, so the env's defaults still apply.

When the env class is unknown (a factory without a return annotation), names cannot be checked
and every kwarg is passed through.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model
from pydantic import ValidationError as PydanticValidationError

from openenv.errors import ValidationError
from openenv.wire import validation_errors

from .frames import extra_forbidden

__all__ = ["StepKwargsValidator"]


class StepKwargsValidator:
    """Validates the ``kwargs`` object of a ``step`` frame for one env class."""

    def __init__(self, env_class: type | None, *, is_async: bool) -> None:
        self._model: type[BaseModel] | None = None
        self._forbidden: frozenset[str] = frozenset()
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
        self._model = create_model(  # type: ignore[call-overload]
            "StepKwargs",
            __config__=ConfigDict(extra="allow" if var_kw else "forbid", arbitrary_types_allowed=True),
            **fields,
        )

    def __call__(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments to pass to ``step``; ``ValidationError`` if they do not fit."""
        if not kwargs:
            return kwargs
        clash = [k for k in kwargs if k in self._forbidden]
        if clash:
            raise ValidationError("Invalid message", data={
                "errors": [extra_forbidden(["kwargs", k], kwargs[k]) for k in clash]})
        if self._model is None:
            return kwargs
        try:
            model = self._model.model_validate(kwargs)
        except PydanticValidationError as exc:
            raise ValidationError(
                "Invalid message", data={"errors": validation_errors(exc, ("kwargs",))}) from None
        # Attribute access (not model_dump) keeps model-typed arguments as model instances.
        out = {name: getattr(model, name) for name in model.model_fields_set}
        if model.model_extra:
            out.update(model.model_extra)
        return out

