"""Fork latency per env: ``EnvClient.fork()`` against starting over, in the same run.

``python -m bench.fork [--quick] [--steps 8] [--rounds 20] [--env NAME ...]`` serves each installed
env that declares ``SUPPORTS_SNAPSHOT`` on 127.0.0.1 (in-process server, WebSocket), plays
``--steps`` steps (the first legal action each time, as the env contract does), then per round:

* ``fork`` — ``await env.fork()``: a snapshot, a new session on the same server, a restore;
* ``replay`` — the reference: a new session, ``reset(seed)`` and the same ``--steps`` actions
  again (what a client without snapshots does to branch);
* ``restart`` — a new session and a ``reset`` only (the floor: a new episode, no state).

It prints p50 of each in milliseconds, fork/replay (< 1 means forking beats replaying), and the
snapshot's size in bytes. Issue 31 asks for fork latency per env; there is no goal ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from types import SimpleNamespace
from typing import Any

from openenv.client import GenericEnvClient
from openenv.plugins import get_plugin_manager
from openenv.testing import EnvContract, live_server

__all__ = ["main", "measure"]


#: The kit's seeded random walk, always measured: the floor of a fork (tiny state, inline env).
_KIT = "openenv.testing.walk:WalkEnv"


def _snapshot_envs(names: list[str] | None) -> list[tuple[str, Any]]:
    registry = get_plugin_manager().catalog.envs
    out: list[tuple[str, Any]] = [] if names else [(_KIT, _KIT)]
    for name in sorted(names or registry.names()):
        try:
            cls = registry.load(name)
        except Exception:
            continue
        if getattr(cls, "SUPPORTS_SNAPSHOT", False):
            out.append((name, cls))
    return out


async def _play(client: GenericEnvClient, contract: EnvContract, fallback: list[Any], steps: int, seed: int) -> int:
    result = await client.reset(seed=seed)
    played = 0
    for _ in range(steps):
        legal = contract._legal_of(SimpleNamespace(legal_actions=result.observation.get("legal_actions")))
        action = (legal or fallback)[0]
        result = await client.step(action if isinstance(action, dict) else action.model_dump())
        played += 1
        if result.done:
            break
    return played


async def _env_row(name: str, contract: EnvContract, fallback: list[Any], steps: int, rounds: int) -> dict[str, Any]:
    with live_server(name, max_sessions=4) as server:
        async with GenericEnvClient(server.url) as env:
            played = await _play(env, contract, fallback, steps, seed=1)
            size = len(json.dumps(await env.snapshot()))
            fork, replay, restart = [], [], []
            for _ in range(rounds):
                started = time.perf_counter()
                branch, _ = await env.fork()
                fork.append(time.perf_counter() - started)
                await branch.close()
                async with GenericEnvClient(server.url) as again:
                    started = time.perf_counter()
                    await _play(again, contract, fallback, played, seed=1)
                    replay.append(time.perf_counter() - started)
                async with GenericEnvClient(server.url) as fresh:
                    started = time.perf_counter()
                    await fresh.reset(seed=1)
                    restart.append(time.perf_counter() - started)
    ms = {k: statistics.median(v) * 1000 for k, v in (("fork", fork), ("replay", replay), ("restart", restart))}
    label = "walk (kit)" if name == _KIT else name
    return {"env": label, "steps": played, "snapshot_bytes": size, **{f"{k}_ms": v for k, v in ms.items()},
            "fork_vs_replay": ms["fork"] / ms["replay"] if ms["replay"] else float("nan")}


def measure(*, names: list[str] | None, steps: int, rounds: int) -> list[dict[str, Any]]:
    rows = []
    for name, cls in _snapshot_envs(names):
        if isinstance(cls, str):
            from openenv.registry import load_ref

            cls = load_ref(cls)
        contract = EnvContract(cls, served=False)
        fallback = contract.actions()  # outside the event loop: it resets an instance in-process
        rows.append(asyncio.run(_env_row(name, contract, fallback, steps, rounds)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fork", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds (CI)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--env", action="append", dest="envs", help="only this env (repeatable)")
    args = ap.parse_args(argv)
    rows = measure(names=args.envs, steps=args.steps, rounds=3 if args.quick else args.rounds)
    if not rows:
        print("fork: no installed env declares SUPPORTS_SNAPSHOT")
        return 0
    print(f"{'env':<14} {'steps':>5} {'snapshot B':>10} {'fork ms':>8} {'replay ms':>9} {'restart ms':>10} "
          f"{'fork/replay':>11}")
    for r in rows:
        print(f"{r['env']:<14} {r['steps']:>5} {r['snapshot_bytes']:>10} {r['fork_ms']:>8.2f} {r['replay_ms']:>9.2f} "
              f"{r['restart_ms']:>10.2f} {r['fork_vs_replay']:>11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
