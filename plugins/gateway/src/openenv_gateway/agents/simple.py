"""``python -m openenv_gateway.agents.simple``: a black-box coding agent for the command harness.

It knows nothing of OpenEnv: like any CLI agent it takes its task and its provider from the
environment a harness gives it, and leaves its work in its working directory.

* the task: ``OPENENV_PROMPT`` (else stdin); the model: ``OPENENV_MODEL``; the provider:
  ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (the gateway and the episode's key under a harness);
* the loop (at most ``OPENENV_AGENT_TURNS`` model calls, default 3): ask the model for the whole
  solution, take the first fenced code block of the reply (else the whole reply), write it to
  ``OPENENV_AGENT_OUTPUT`` (default ``solution.py``) and compile it; a syntax error goes back to
  the model as the next user message, code that compiles ends the loop;
* its stdout: the last answer; its exit code: 0 when it wrote an answer, 1 when the provider failed
  (the message on stderr), 2 for a bad setting.

The env, not the agent, grades the answer: the harness's verdict submits the file.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

__all__ = ["SYSTEM", "extract_code", "main", "syntax_error"]

SYSTEM = ("You are a Python programmer. Reply with the complete solution as one ```python fenced block "
          "and nothing else.")
_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(reply: str) -> str:
    """The first fenced code block of ``reply`` (an unclosed one runs to the end), else the whole reply."""
    match = _FENCE.search(reply)
    return (match.group(1) if match else reply).strip() + "\n"


def syntax_error(code: str, filename: str) -> str | None:
    """What is wrong with ``code`` as Python (``None`` when it compiles)."""
    try:
        compile(code, filename, "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        return f"{type(exc).__name__}: {exc}"
    return None


def _int_setting(name: str, default: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        print(f"error: {name} must be a positive integer, got {raw!r}", file=sys.stderr)
        raise SystemExit(2)
    return value


def main() -> int:
    try:
        import openai
    except ImportError:
        print("error: this agent needs the openai package: pip install 'openenvkit-gateway[agents]'", file=sys.stderr)
        return 2
    prompt = os.environ.get("OPENENV_PROMPT") or sys.stdin.read()
    turns = _int_setting("OPENENV_AGENT_TURNS", 3)
    max_tokens = _int_setting("OPENENV_AGENT_MAX_TOKENS", 256)
    output = Path(os.environ.get("OPENENV_AGENT_OUTPUT", "solution.py"))
    model = os.environ.get("OPENENV_MODEL", "openenv")
    # no retries: a refused or failed call is the harness's to record, not ours to hide
    client = openai.OpenAI(max_retries=0, timeout=float(os.environ.get("OPENENV_AGENT_TIMEOUT_S", "120")))
    messages: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    code = ""
    for _ in range(turns):
        try:
            reply = client.chat.completions.create(model=model, messages=messages,  # type: ignore[arg-type]
                                                   max_tokens=max_tokens, temperature=0)
        except openai.OpenAIError as exc:
            print(f"error: the model call failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1 if not code else 0  # an answer already written stands
        text = reply.choices[0].message.content or ""
        code = extract_code(text)
        output.write_text(code)
        problem = syntax_error(code, str(output))
        if problem is None:
            break
        messages += [{"role": "assistant", "content": text},
                     {"role": "user", "content": f"That does not compile ({problem}). Reply with the corrected "
                                                 "complete solution."}]
    print(code, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
