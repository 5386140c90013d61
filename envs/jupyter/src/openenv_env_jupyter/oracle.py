"""The Jupyter env's oracle: solves each task kind with code run in the kernel, then submits.

``solve(obs)`` is a policy over observations (dicts or models): while no answer has been printed
it sends the kind's solution cell; once the cell's stdout holds the answer it submits it. It
identifies the task by its question, as an agent reading it would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_env_jupyter.models import JupyterObservation

__all__ = ["SOLUTIONS", "solve"]

#: A cell per task kind that prints exactly the answer (keyed by a phrase of the question).
SOLUTIONS: dict[str, str] = {
    "mean of `units`": "import csv\nrows = list(csv.DictReader(open('sales.csv')))\n"
                       "print(round(sum(int(r['units']) for r in rows) / len(rows), 4))",
    "largest total revenue": "import csv, collections\nrev = collections.Counter()\n"
                             "for r in csv.DictReader(open('sales.csv')):\n"
                             "    rev[r['region']] += int(r['units']) * float(r['price'])\n"
                             "print(max(sorted(rev), key=rev.__getitem__))",
    "prime numbers are smaller than": "import re\nn = int(re.search(r'than (\\d+)', QUESTION).group(1))\n"
                                      "print(sum(all(k % p for p in range(2, int(k**0.5) + 1)) for k in range(2, n)))",
    "occur in words.txt": "import re\nw = re.search(r\"word '(\\w+)'\", QUESTION).group(1)\n"
                          "print(sum(t.lower() == w for t in open('words.txt').read().split()))",
}


def solve(obs: JupyterObservation | Mapping[str, Any]) -> dict[str, Any]:
    """The next action: run the solution cell, then submit what it printed."""
    data = obs.model_dump() if isinstance(obs, JupyterObservation) else obs
    question = data.get("question", "")
    cell = next((code for phrase, code in SOLUTIONS.items() if phrase in question), None)
    if cell is None:
        return {"kind": "execute", "code": "print('no task: this is a free kernel')"}
    if data.get("status") == "ok" and data.get("stdout", "").strip():
        return {"kind": "submit", "answer": data["stdout"].strip().splitlines()[-1]}
    return {"kind": "execute", "code": f"QUESTION = {question!r}\n{cell}", "timeout_s": 60.0}
