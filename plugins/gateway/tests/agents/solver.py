"""A test agent: one model call through the gateway (so the episode has a capture), then a correct
solution of the coding env's ``two_sum`` / ``word_count`` test tasks, whatever the model said: the
env's verdict must then be reward 1.0 on those tasks and 0.0 on the others."""

from __future__ import annotations

import os
from pathlib import Path

import openai

SOLUTIONS = {
    "two_sum": "def two_sum(nums, target):\n    seen = {}\n    for j, n in enumerate(nums):\n"
               "        if target - n in seen:\n            return (seen[target - n], j)\n        seen[n] = j\n"
               "    return None\n",
    "word_count": "def word_count(text):\n    out = {}\n    for w in text.lower().split():\n"
                  "        out[w] = out.get(w, 0) + 1\n    return out\n",
}

prompt = os.environ["OPENENV_PROMPT"]
openai.OpenAI(max_retries=0).chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
name = next((n for n in SOLUTIONS if f"`{n}(" in prompt), None)
Path("solution.py").write_text(SOLUTIONS[name] if name else "pass\n")
