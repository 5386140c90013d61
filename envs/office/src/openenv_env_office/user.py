"""The simulated user: answers the agent's ``ask_user`` questions from the task's hidden goal.

* ``ScriptedUser`` (the default) is deterministic: each answer of the task has keywords; a
  question gets every answer one of whose keywords it contains (whole words, case-insensitive),
  else ``I don't know``.
* ``LlmUser`` asks a chat model over any OpenAI-compatible endpoint (the ``openai`` SDK, the
  ``llm`` extra) to play the user, with the task's answers as the only facts it may reveal. Its
  base URL, model and key come from arguments or ``OFFICE_USER_BASE_URL`` / ``OFFICE_USER_MODEL``
  / ``OFFICE_USER_API_KEY``. A failed call is a ``UserSimulatorError`` that names the endpoint.

``user_from_env()`` picks one: ``OFFICE_USER_SIMULATOR=llm`` selects the LLM user.
"""

from __future__ import annotations

import os
import re
from typing import Any, Protocol

from openenv.errors import ConfigError
from openenv_env_office.tasks import OfficeTask

__all__ = ["DONT_KNOW", "LlmUser", "ScriptedUser", "UserSimulator", "UserSimulatorError", "user_from_env"]

DONT_KNOW = "I don't know. Please decide that yourself or ask me something else."


class UserSimulatorError(RuntimeError):
    """The user simulator could not answer (an LLM endpoint that failed)."""


class UserSimulator(Protocol):
    def answer(self, task: OfficeTask, question: str) -> str:
        """The user's reply to ``question`` about ``task``."""
        ...


def _has_keyword(question: str, keyword: str) -> bool:
    return re.search(rf"(?<![a-z]){re.escape(keyword.lower())}(?![a-z])", question.lower()) is not None


class ScriptedUser:
    """Keyword/slot matching over the task's answers (deterministic)."""

    def answer(self, task: OfficeTask, question: str) -> str:
        replies = [a["answer"] for a in task.answers if any(_has_keyword(question, k) for k in a["keywords"])]
        return " ".join(replies) if replies else DONT_KNOW


class LlmUser:
    """A chat model plays the user; it knows only the request and the answers of the task."""

    def __init__(self, *, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout_s: float = 30.0) -> None:
        self.base_url = base_url or os.environ.get("OFFICE_USER_BASE_URL")
        self.model = model or os.environ.get("OFFICE_USER_MODEL")
        if not self.base_url or not self.model:
            raise ConfigError("the LLM user needs an endpoint and a model: pass base_url= and model=, or set "
                              "OFFICE_USER_BASE_URL (an OpenAI-compatible /v1 URL) and OFFICE_USER_MODEL")
        try:
            import openai
        except ImportError:
            raise ConfigError("the LLM user needs the openai SDK: pip install 'openenvkit-env-office[llm]'") from None
        self._client = openai.OpenAI(base_url=self.base_url, timeout=timeout_s, max_retries=1,
                                     api_key=api_key or os.environ.get("OFFICE_USER_API_KEY") or "unused")

    def prompt(self, task: OfficeTask) -> str:
        facts = "\n".join(f"- {a['answer']}" for a in task.answers) or "- (nothing beyond your request)"
        return ("You are a busy office worker talking to your assistant. Your request was:\n"
                f"{task.request}\n\nFacts you know and may share when asked:\n{facts}\n\n"
                "Answer the assistant's question in one or two sentences using only these facts. "
                f"If the facts do not answer it, reply exactly: {DONT_KNOW}")

    def answer(self, task: OfficeTask, question: str) -> str:
        messages: list[Any] = [{"role": "system", "content": self.prompt(task)},
                               {"role": "user", "content": question}]
        try:
            reply = self._client.chat.completions.create(model=str(self.model), messages=messages,
                                                         temperature=0)
        except Exception as exc:
            raise UserSimulatorError(f"the LLM user at {self.base_url} failed: {type(exc).__name__}: {exc}; check "
                                     "OFFICE_USER_BASE_URL / OFFICE_USER_MODEL, or use the scripted user") from exc
        content = reply.choices[0].message.content if reply.choices else None
        return content.strip() if content and content.strip() else DONT_KNOW


def user_from_env() -> UserSimulator:
    """The simulator ``OFFICE_USER_SIMULATOR`` names: ``scripted`` (default) or ``llm``."""
    kind = os.environ.get("OFFICE_USER_SIMULATOR", "scripted").strip().lower()
    if kind == "scripted":
        return ScriptedUser()
    if kind == "llm":
        return LlmUser()
    raise ConfigError(f"OFFICE_USER_SIMULATOR={kind!r} is not a user simulator; use 'scripted' or 'llm'")
