"""Runs in upstream's venv: upstream 0.10's own Task API client code against OUR servers.

* ``HarborEnv`` (``openenv.harbor.client``), upstream's only client of the Task API, against our
  server of an upstream-style ``harbor_env``: ``splits``, ``num_tasks``, ``get_task``,
  ``get_task_range`` parse into upstream's ``HarborTaskRef``; an unknown split and an index out of
  range raise ``httpx.HTTPStatusError``; ``capabilities`` (an MCP tool call) still works after them.
* Plain ``httpx`` and ``requests`` calls whose bodies are upstream's own request models
  (``ListTasksRequest``, ``NumTasksRequest``, ``GetTaskRequest``, ``GetTaskRangeRequest`` from
  ``openenv.core.env_server``) against our routes for a native env (``numbers``).

Prints one JSON object of observations; the pytest side asserts on it.
"""

from __future__ import annotations

import json
import sys

import httpx

from openenv.core.env_server import GetTaskRangeRequest, GetTaskRequest, ListTasksRequest, NumTasksRequest
from openenv.harbor.client import HarborEnv
from openenv.harbor.models import HarborTaskRef


def _status_error(call) -> dict:
    try:
        call()
    except httpx.HTTPStatusError as exc:
        return {"status": exc.response.status_code, "body": exc.response.json()}
    return {"status": None, "body": None}


def harbor(base_url: str) -> dict:
    out: dict = {}
    with HarborEnv(base_url=base_url) as env:
        splits = env.splits()
        out["splits"] = splits
        split = splits[0]["name"]
        out["num_tasks"] = {s["name"]: env.num_tasks(s["name"]) for s in splits}
        task = env.get_task(split, 3)
        out["task_is_ref"] = isinstance(task, HarborTaskRef)
        out["task"] = task.model_dump()
        window = env.get_task_range(split, 2, 5)
        out["range"] = [t.model_dump() for t in window]
        out["range_all"] = len(env.get_task_range("swebench-verified"))
        out["unknown_split"] = _status_error(lambda: env.num_tasks("terminal-bench@2"))
        out["bad_index"] = _status_error(lambda: env.get_task(split, 99))
        out["capabilities"] = env.capabilities()
    return out


def generic(base_url: str) -> dict:
    out: dict = {}
    with httpx.Client(base_url=base_url, timeout=30) as http:
        out["environments"] = http.get("/list_environments").json()
        out["splits"] = http.get("/numbers/splits").json()
        listing = http.post("/numbers/tasks", json=ListTasksRequest(split="train").model_dump()).json()
        out["listing"] = {"env_name": listing["env_name"], "n": len(listing["tasks"]), "first": listing["tasks"][0]}
        out["num_tasks"] = http.post("/numbers/num_tasks", json=NumTasksRequest(split="test").model_dump()).json()
        out["task"] = http.post("/numbers/task", json=GetTaskRequest(split="test", index=4).model_dump()).json()
        # model_dump() keeps start/stop as null when unset: the full split
        full = http.post("/numbers/task_range", json=GetTaskRangeRequest(split="test").model_dump()).json()
        out["range_full"] = len(full["tasks"])
        window = http.post("/numbers/task_range",
                           json=GetTaskRangeRequest(split="train", start=9_998, stop=20_000).model_dump()).json()
        out["range_tail"] = [t["id"] for t in window["tasks"]]
        bad = http.post("/numbers/task", json=GetTaskRequest(split="tset", index=0).model_dump())
        out["unknown_split"] = {"status": bad.status_code, "body": bad.json()}
        bad = http.post("/numbers/task", json=GetTaskRequest(split="test", index=20).model_dump())
        out["bad_index"] = {"status": bad.status_code, "body": bad.json()}
        bad = http.post("/numbers/tasks", json={"splt": "train"})
        out["bad_body"] = {"status": bad.status_code, "body": bad.json()}
        bad = http.post("/nubmers/num_tasks", json=NumTasksRequest(split="test").model_dump())
        out["unknown_env"] = {"status": bad.status_code, "body": bad.json()}
    try:
        import requests
    except ImportError:  # not a dependency of upstream's wheel everywhere
        out["requests"] = None
    else:
        got = requests.post(f"{base_url}/numbers/num_tasks", json=NumTasksRequest(split="train").model_dump(),
                            timeout=30)
        out["requests"] = {"status": got.status_code, "body": got.json()}
    return out


if __name__ == "__main__":
    print(json.dumps({"harbor": harbor(sys.argv[1]), "generic": generic(sys.argv[2])}))
