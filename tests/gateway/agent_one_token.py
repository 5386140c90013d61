"""A black-box agent program for the gateway tests: three one-token model calls through whatever
``OPENAI_BASE_URL``/``OPENAI_API_KEY`` say (the harness points them at the gateway), then its answer
(the model's words) on stdout. One-token answers re-render to the same ids, so its turns link."""

from __future__ import annotations

import os

import openai


def main() -> None:
    client = openai.OpenAI(max_retries=0)
    messages = [{"role": "user", "content": os.environ["OPENENV_PROMPT"]}]
    for turn in range(3):
        reply = client.chat.completions.create(model="m", messages=messages, max_tokens=1)  # type: ignore[arg-type]
        messages += [{"role": "assistant", "content": reply.choices[0].message.content or ""},
                     {"role": "user", "content": f"go on {turn}"}]
    print("".join(m["content"] for m in messages if m["role"] == "assistant"))


if __name__ == "__main__":
    main()
