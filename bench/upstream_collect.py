"""Upstream ``openenv==0.10.0``'s ``openenv collect`` on our served OpenSpiel env (runs in upstream's venv).

``<upstream venv>/bin/python bench/upstream_collect.py --base-url URL --episodes N --result-file R.json
[--token T]``

This file is executed by upstream's interpreter, where ``openenv`` is upstream's package; it
imports nothing from this repository. It calls upstream's CLI command function
``openenv.cli.commands.collect.collect`` itself (``openenv collect openspiel:tic_tac_toe
--base-url URL -o DIR -n N --keep-losses --no-resume``; the scripted teacher, upstream's
default), which drives upstream's ``CollectRunner``, ``MCPHarnessAdapter``,
``StepEnvSessionAdapter`` and ``RolloutSerializer``.

That command is wired to two env families whose packages (``openspiel_env``,
``reasoning_gym_env``) are not on the package index, only in upstream's source tree; it imports
them as the module attributes ``OpenSpielEnv`` and ``OpenSpielSessionFactory``, which upstream
set aside for tests to replace. Both are replaced here by the thin equivalents its docstring asks
an env to provide, written for our OpenSpiel env: the client is upstream's ``GenericEnvClient``
(plus our server's bearer token), the factory exposes upstream's ``play_move(action_id)`` tool
with the tool result upstream's OpenSpiel factory builds (legal actions, reward, done), mapped
onto our action (``{"action": id}``) and reset keywords (``game``). Everything else is upstream's
code as installed.

Writes one JSON object to the result file: episodes and steps (tool calls) in ``results.jsonl``,
and the wall time of the command (its console output, a rich progress bar, goes to stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import openenv.cli.commands.collect as upstream_collect
from openenv.core.env_server.mcp_types import Tool
from openenv.core.generic_client import GenericEnvClient
from openenv.core.harness import StepEnvSessionAdapter, ToolResult

__all__ = ["BenchOpenSpielClient", "BenchOpenSpielSessionFactory", "main"]

_PLAY_MOVE = Tool(
    name="play_move",
    description="Play a move by its integer action_id, one of legal_actions in the latest observation.",
    input_schema={"type": "object", "properties": {"action_id": {"type": "integer"}}, "required": ["action_id"]},
)


class BenchOpenSpielClient(GenericEnvClient):
    """Upstream's dict client, sending our server's token (upstream's collect has no token option)."""

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        token = os.environ.get("OPENENV_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        super().__init__(base_url, headers=headers, **kwargs)


class BenchOpenSpielSessionFactory:
    """``OpenSpielSessionFactory(client_factory, game_name=...)`` as upstream's collect calls it."""

    def __init__(self, client_factory: Any, *, game_name: str = "tic_tac_toe") -> None:
        self._client_factory = client_factory
        self._game = game_name

    def create(self, task: Any = None, seed: int | None = None, episode_id: str | None = None) -> Any:
        game = self._game

        def initial_messages(result: Any, _task: Any) -> list[dict[str, Any]]:
            legal = list(result.observation.get("legal_actions") or [])
            return [{"role": "user", "content": f"You are playing {game}.\nCall the play_move tool with an "
                                                f"action_id drawn from legal_actions.\nLegal actions: {legal}"}]

        def tool_result(_name: str, arguments: dict[str, Any], result: Any, state: Any) -> ToolResult:
            observation = result.observation
            data = {"action_id": arguments.get("action_id"),
                    "legal_actions": list(observation.get("legal_actions") or []), "reward": result.reward,
                    "done": result.done, "current_player_id": observation.get("current_player")}
            return ToolResult(data=data, done=bool(result.done), metadata={"reward": result.reward, "state": state})

        return StepEnvSessionAdapter(
            client=self._client_factory(), task=task, seed=seed, episode_id=episode_id, tool_specs=[_PLAY_MOVE],
            action_builder=lambda _name, arguments: {"action": int(arguments["action_id"])},
            initial_messages_builder=initial_messages, tool_result_builder=tool_result,
            reset_kwargs={"game": game})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="upstream_collect.py", description=__doc__.split("\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--episodes", type=int, required=True)
    parser.add_argument("--result-file", required=True, type=Path)
    parser.add_argument("--token", default=None, help="the server's token (else OPENENV_TOKEN)")
    args = parser.parse_args(argv)
    if args.token:
        os.environ["OPENENV_TOKEN"] = args.token
    upstream_collect.OpenSpielEnv = BenchOpenSpielClient
    upstream_collect.OpenSpielSessionFactory = BenchOpenSpielSessionFactory
    with tempfile.TemporaryDirectory(prefix="bench-upstream-collect-") as tmp:
        out = Path(tmp)
        started = time.perf_counter()
        # the typer command's own defaults, but every episode kept and a fresh file
        upstream_collect.collect(
            env="openspiel:tic_tac_toe", base_url=args.base_url, output_dir=out, num_episodes=args.episodes,
            max_turns=9, episode_id_prefix="ep", resume=False, provider="scripted", model=None, llm_endpoint=None,
            llm_port=None, temperature=0.2, max_tokens=200, keep_losses=True, push_to_hub=None, private=False,
            commit_message=None, dataset_config=None, system_prompt=None)
        elapsed = time.perf_counter() - started
        lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    steps = sum(len(r["tool_trace"]) for r in records)
    args.result_file.write_text(json.dumps({"episodes": len(records), "steps": steps, "elapsed_s": elapsed}))
    return 0 if len(records) == args.episodes else 1


if __name__ == "__main__":
    raise SystemExit(main())
