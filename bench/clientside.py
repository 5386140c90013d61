"""Client-side rows: the kernel's REST client against raw httpx, and the CLI's start time.

* **REST client vs raw httpx.** One ``openenv serve echo`` (pinned to the server CPU, like every
  target) is driven over HTTP by two clients in the same run, in alternating rounds so drift hits
  both: the kernel's ``EnvClient(..., transport="rest")`` (typed echo action and observation, as a
  user writes it) and a raw keep-alive ``httpx.Client`` sending the same requests (``POST
  /sessions``, ``POST /reset``, then ``POST /step`` with the ``OpenEnv-Session-Id`` header, each
  reply parsed as JSON). Each round is one fresh session: create, reset, ``steps`` steps, delete;
  only the steps are timed. Reported: ms per step of each (median of the rounds) and the ratio
  ``raw ms ÷ client ms`` (the client's throughput relative to raw httpx; goal ≥ 0.8).
* **CLI start time.** ``openenv --help`` (the console script next to this interpreter, else
  ``python -m openenv``) and ``python -c pass`` as the interpreter's own floor, each run ``runs``
  times, interleaved; median wall time of each (goal for ``--help``: under 1 s).

``python -m bench.clientside [--quick]`` runs only these rows and prints them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import procfs, targets

__all__ = ["ClientSettings", "FULL", "QUICK", "cli_start", "rest_client_vs_httpx", "run"]

#: Goals of issue 12, reported (never asserted).
REST_GOAL = 0.8
HELP_GOAL_S = 1.0


@dataclass
class ClientSettings:
    """Sizes of the client-side rows."""

    rest_steps: int
    rest_rounds: int
    cli_runs: int


QUICK = ClientSettings(rest_steps=100, rest_rounds=3, cli_runs=5)
FULL = ClientSettings(rest_steps=1000, rest_rounds=5, cli_runs=15)


# -- REST client vs raw httpx --------------------------------------------------------------------


def _raw_round(base: str, steps: int) -> float:
    """Seconds per step of a raw keep-alive httpx client over one fresh session."""
    import httpx

    with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
        created = http.post("/sessions", json={})
        created.raise_for_status()
        sid = created.json()["session_id"]
        headers = {targets.SESSION_HEADER: sid}
        http.post("/reset", json={}, headers=headers).raise_for_status()
        body = targets.HTTP_STEP_BODY
        t0 = time.perf_counter()
        for _ in range(steps):
            reply = http.post("/step", json=body, headers=headers)
            reply.raise_for_status()
            if "observation" not in reply.json():
                raise RuntimeError(f"raw httpx: unexpected /step reply {reply.text[:200]!r}")
        elapsed = time.perf_counter() - t0
        http.delete(f"/sessions/{sid}")
    return elapsed / steps


async def _client_round_async(base: str, steps: int) -> float:
    from openenv import EnvClient
    from openenv_env_echo.models import EchoAction, EchoObservation

    action = EchoAction(message=targets.HTTP_STEP_BODY["action"]["message"])
    async with EnvClient(base, action_type=EchoAction, observation_type=EchoObservation,
                         transport="rest") as env:
        await env.reset()
        t0 = time.perf_counter()
        for _ in range(steps):
            result = await env.step(action)
            if result.observation.echoed_message != action.message:
                raise RuntimeError(f"kernel REST client: unexpected observation {result.observation!r}")
        return (time.perf_counter() - t0) / steps


def _client_round(base: str, steps: int) -> float:
    """Seconds per step of the kernel's REST client (async API) over one fresh session."""
    return asyncio.run(_client_round_async(base, steps))


def rest_client_vs_httpx(s: ClientSettings, log: Any, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """The REST row: both clients against one ``openenv serve echo``; see the module docstring."""
    plan = plan or {"server": None, "load": None}
    procfs.pin(plan["load"])
    with tempfile.TemporaryDirectory(prefix="openenv-bench-client-") as tmp:
        workdir = Path(tmp)
        target = targets.make_targets(["ours-sync"], templates=workdir / "unused", max_sessions=16,
                                      upstream_python=None)[0][0]
        try:
            run = targets.start(target, workdir, plan["server"])
        except Exception as exc:
            return {"failed": f"start: {exc}"}
        base = f"http://{targets.HOST}:{run.port}"
        raw: list[float] = []
        client: list[float] = []
        try:
            # one uncounted warm-up round of each (imports, first connection)
            _raw_round(base, min(20, s.rest_steps))
            _client_round(base, min(20, s.rest_steps))
            for r in range(s.rest_rounds):
                order = (("raw", _raw_round), ("client", _client_round))
                for name, fn in order if r % 2 == 0 else order[::-1]:
                    (raw if name == "raw" else client).append(fn(base, s.rest_steps))
        except Exception as exc:
            return {"failed": f"{type(exc).__name__}: {exc}", "server_log": run.log_tail(1000)}
        finally:
            run.stop()
    raw_ms = statistics.median(raw) * 1000
    client_ms = statistics.median(client) * 1000
    ratio = round(raw_ms / client_ms, 3) if client_ms else None
    log(f"  REST: kernel client {client_ms:.3f} ms/step, raw httpx {raw_ms:.3f} ms/step, ratio {ratio}")
    return {"steps_per_round": s.rest_steps, "rounds": s.rest_rounds, "client_ms": round(client_ms, 4),
            "raw_httpx_ms": round(raw_ms, 4), "ratio": ratio, "goal": REST_GOAL,
            "met": None if ratio is None else ratio >= REST_GOAL,
            "client": "EnvClient(transport='rest'), async API, typed EchoAction/EchoObservation",
            "raw": "httpx.Client (one keep-alive connection), JSON bodies"}


# -- CLI start time ------------------------------------------------------------------------------


def _openenv_argv() -> list[str]:
    script = Path(sys.executable).parent / "openenv"
    return [str(script), "--help"] if script.exists() else [sys.executable, "-m", "openenv", "--help"]


def _time_once(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, timeout=60, env=targets.our_env(), cwd=str(targets.ROOT))
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-300:]!r}")
    return elapsed


def cli_start(s: ClientSettings, log: Any) -> dict[str, Any]:
    """Median wall time of ``openenv --help`` and of ``python -c pass``, interleaved."""
    help_argv = _openenv_argv()
    floor_argv = [sys.executable, "-c", "pass"]
    helps: list[float] = []
    floors: list[float] = []
    try:
        _time_once(help_argv)  # uncounted: fills the OS file cache like any second run would
        for _ in range(s.cli_runs):
            helps.append(_time_once(help_argv))
            floors.append(_time_once(floor_argv))
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return {"failed": str(exc)}
    help_s = statistics.median(helps)
    floor_s = statistics.median(floors)
    log(f"  CLI: openenv --help {help_s:.3f} s, python -c pass {floor_s:.3f} s (median of {s.cli_runs})")
    return {"runs": s.cli_runs, "help_s": round(help_s, 4), "help_min_s": round(min(helps), 4),
            "help_max_s": round(max(helps), 4), "python_pass_s": round(floor_s, 4),
            "help_over_python_s": round(help_s - floor_s, 4), "goal_s": HELP_GOAL_S,
            "met": help_s < HELP_GOAL_S, "command": " ".join(Path(a).name if i == 0 else a
                                                             for i, a in enumerate(help_argv))}


def run(s: ClientSettings, log: Any, plan: dict[str, Any] | None = None) -> dict[str, Any]:
    """Both client-side rows, as one JSON-able dict (``report.print_client`` prints it)."""
    log("client side: kernel REST client vs raw httpx ...")
    rest = rest_client_vs_httpx(s, log, plan)
    log("client side: CLI start time ...")
    return {"rest": rest, "cli": cli_start(s, log)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.clientside", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the sizes of `python -m bench --quick`")
    parser.add_argument("--no-pin", action="store_true", help="do not pin server and client to separate CPUs")
    args = parser.parse_args(argv)
    plan = {"server": None, "load": None} if args.no_pin else procfs.pinning_plan()
    result = run(QUICK if args.quick else FULL, lambda m: print(m, file=sys.stderr), plan)
    from bench import report

    report.print_client(result)
    print(json.dumps(result))
    return 0 if all("failed" not in v for v in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
