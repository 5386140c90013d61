"""The env class of packages imported from verifiers' old API (``load_environment`` modules).

Same wire as ``VerifiersEnv`` (action ``{"completion": text}``, the same observation): ``reset``
shows a dataset row's prompt (system prompt and few-shot included, as verifiers formatted it);
``step`` ends the episode with the env's own rubric's score of the reply (``LegacyHandle.score``).
The env is built once per process (``load_environment`` with the import's arguments) and shared by
the sessions: a rubric scores each reply from its own state.
"""

from __future__ import annotations

import json
import threading
from typing import Any, ClassVar

from openenv.errors import ExecutionError, ValidationError
from openenv.tasks import Task
from openenv_import_verifiers.env import OneReplyEnv
from openenv_import_verifiers.legacy import LegacyHandle

__all__ = ["LegacyVerifiersEnv"]

_HANDLES: dict[str, LegacyHandle] = {}
_LOCK = threading.Lock()


def _handle(module: str, args: dict[str, Any]) -> LegacyHandle:
    key = json.dumps([module, args], sort_keys=True)
    with _LOCK:
        if key not in _HANDLES:
            _HANDLES[key] = LegacyHandle.load(module, args)
        return _HANDLES[key]


def _text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    parts = [m.get("content") for m in prompt or [] if isinstance(m, dict) and m.get("role") != "system"]
    return "\n\n".join(p for p in parts if isinstance(p, str))


def _system(prompt: Any) -> str | None:
    if isinstance(prompt, list):
        for m in prompt:
            if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
                return str(m["content"])
    return None


class LegacyVerifiersEnv(OneReplyEnv):
    """Subclasses set ``env_module`` (a module with ``load_environment``), ``env_args`` and ``tasks``."""

    env_module: ClassVar[str] = ""
    env_args: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        if not self.env_module:
            raise ValidationError(f"{type(self).__qualname__} names no env_module: a generated env sets it to the "
                                  "verifiers module it was imported from")
        self._handle = _handle(self.env_module, dict(self.env_args))
        super().__init__()

    async def _score(self, completion: str) -> Any:
        assert self._task is not None
        try:
            return await self._handle.score(dict(self._task.data), completion)
        except Exception as exc:  # the rubric's own code (verifiers logs and zeroes a reward that raises)
            raise ExecutionError(f"the verifiers rubric's scoring failed: {type(exc).__name__}: {exc}") from None

    def _observation(self, task: Task) -> dict[str, Any]:
        prompt = task.data.get("prompt")
        return {"prompt": prompt, "prompt_text": _text(prompt),
                "system_prompt": _system(prompt) or getattr(self._handle.env, "system_prompt", None)}

    def _describe(self) -> str:
        return f"verifiers env {self.env_module} (load_environment), one reply per task"
