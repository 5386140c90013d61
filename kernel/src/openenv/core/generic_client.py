"""``openenv.core.generic_client``: dict-in, dict-out client for any env, without its Python types.

Hooks as upstream's (docs/protocol.md §8.2): the action is sent as given (a dict), dumped (a model, including
its ``metadata``) or taken from its attributes; the result's ``observation`` is the payload's
``observation`` dict, ``done`` defaults to ``False``, ``metadata`` is the top-level one; the state is
the raw dict. One deliberate difference: ``reward`` is always a float or ``None`` (an upstream
server's boolean reward becomes ``1.0``/``0.0``, docs/protocol.md §11 B6).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from openenv.client import _reward
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

__all__ = ["GenericAction", "GenericEnvClient"]


class GenericEnvClient(EnvClient[dict[str, Any], dict[str, Any], dict[str, Any]]):
    """``GenericEnvClient(base_url=...)``: ``step({"message": "hi"})`` → ``StepResult`` of dicts."""

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, dict):
            return action
        if isinstance(action, BaseModel):
            return action.model_dump()
        if hasattr(action, "__dict__"):
            return dict(vars(action))
        return dict(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[dict[str, Any]]:
        return StepResult(
            observation=payload.get("observation", {}),
            reward=_reward(payload.get("reward")),
            done=bool(payload.get("done", False)),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    @classmethod
    def from_env(cls, repo_id: str, use_docker: bool = True, provider: Any = None, **kwargs: Any) -> Any:
        """Upstream's ``from_env(repo_id, use_docker=False)``: the env installed here under that name,
        started by the ``local`` provider (``uv`` with ``provider="uv"``); ``await`` the handle or
        call ``.sync()`` on it. ``"openenv/echo-env"``, ``"echo-env"`` and ``"echo"`` all name
        ``echo``. Nothing is downloaded: an env that is not installed is an error naming the close
        matches; ``use_docker=True`` is refused as upstream's Hub bootstrap (use ``from_provider``)."""
        if use_docker:
            return super().from_env(repo_id, use_docker=use_docker, provider=provider, **kwargs)
        from openenv.client_connect import installed_env_for

        return cls.from_provider(installed_env_for(repo_id), provider if isinstance(provider, str) else "local",
                                 **kwargs)


class GenericAction(dict[str, Any]):
    """A dict built from keywords: ``GenericAction(message="hi")`` for ``GenericEnvClient.step``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(kwargs)

    def __repr__(self) -> str:
        return "GenericAction(" + ", ".join(f"{k}={v!r}" for k, v in self.items()) + ")"
