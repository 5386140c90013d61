"""The capture gateway's cost per model call, and whether what it captures is what the engine computed.

``python -m bench.gateway [--quick] [--calls N]``:

* **added latency** — a client process times ``--calls`` sequential chat completions (streaming and
  not) sent directly to an upstream and the same calls through the gateway, interleaved in rounds
  so a change in the machine's load falls on both; the row is the p50 difference. The upstream
  here is the *scripted* one (``openenv_gateway.testing.scripted``, in its own process): a model's
  compute would drown the gateway's overhead, so this row measures the gateway alone. The goal is
  at most 1 ms added at p50. The gateway runs in this process, the client and the upstream in two
  others, so no two of them share an interpreter lock. The row also gives the gateway's CPU time per
  call (this process's rusage over the client's run, divided by the calls it served): on a machine
  shared with other work the p50s move with the load, its CPU cost much less.
* **harness episodes per minute** — ``CommandHarness`` episodes on the served ``coding`` env with 16
  at once: each resets a task, runs an agent program (a stdlib-only script that asks the model
  through the gateway and writes the answer to ``solution.py``), and submits that file for grading
  in the env's sandbox. The model is the scripted upstream, so the answers are not code and score
  0: the row measures the harness's plumbing (process start, gateway, env reset and grading), not
  an agent's skill.
* **ids equal** — the percentage of calls whose captured ``prompt_ids``/``completion_ids`` equal
  what the engine returned for the same request asked directly. With torch and transformers
  installed (``openenvkit-gateway[testmodel]``) the engine is the tiny-model server; without them
  the row is measured against the scripted upstream and says so.

Prints a table and writes ``bench-results/gateway.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from openenv_gateway import CaptureGateway
from openenv_gateway.testing.process import ServerProcess, model_server

__all__ = ["main"]

_CLIENT = textwrap.dedent("""
    import json, sys, time, httpx
    direct, gateway, key, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 8}
    out = {}
    with httpx.Client(timeout=30) as c:
        for stream in (False, True):
            times = {"direct": [], "gateway": []}
            for i in range(calls * 2):
                target = "direct" if i % 2 == 0 else "gateway"
                url = (direct if target == "direct" else gateway) + "/v1/chat/completions"
                headers = {"Authorization": "Bearer " + key}
                t = time.perf_counter()
                if stream:
                    with c.stream("POST", url, json={**body, "stream": True}, headers=headers) as r:
                        for _ in r.iter_lines():
                            pass
                else:
                    c.post(url, json=body, headers=headers).raise_for_status()
                if i >= 20:  # warm-up calls are not timed
                    times[target].append(time.perf_counter() - t)
            out["stream" if stream else "plain"] = times
    print(json.dumps(out))
""")


def _latency(calls: int) -> dict[str, Any]:
    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted"], ready_timeout_s=60) as upstream:
        gateway = CaptureGateway(upstream.base_url)
        gateway.start()
        try:
            key = gateway.open_episode("bench")
            before = resource.getrusage(resource.RUSAGE_SELF)
            done = subprocess.run([sys.executable, "-c", _CLIENT, upstream.base_url, gateway.base_url, key,
                                   str(calls)], capture_output=True, text=True, timeout=600, check=True)
            after = resource.getrusage(resource.RUSAGE_SELF)
            captured = gateway.close_episode(key)
        finally:
            gateway.stop()
    times = json.loads(done.stdout)
    rows: dict[str, Any] = {}
    for mode, t in times.items():
        direct, via = statistics.median(t["direct"]) * 1e3, statistics.median(t["gateway"]) * 1e3
        rows[mode] = {"direct_p50_ms": round(direct, 3), "gateway_p50_ms": round(via, 3),
                      "added_p50_ms": round(via - direct, 3), "calls": len(t["gateway"])}
    rows["captured_turns"] = len(captured.turns)
    cpu_s = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    rows["gateway_cpu_ms_per_call"] = round(cpu_s * 1e3 / len(captured.turns), 3)  # warm-up calls included
    return rows


_AGENT = textwrap.dedent("""
    import json, os, urllib.request
    body = {"model": "m", "messages": [{"role": "user", "content": os.environ["OPENENV_PROMPT"]}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
                                     {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        answer = json.load(r)["choices"][0]["message"]["content"]
    open("solution.py", "w").write(answer)
""")


def _harness_rate(episodes: int, concurrency: int = 16) -> dict[str, Any]:
    import secrets
    import time
    from concurrent.futures import ThreadPoolExecutor

    from openenv.client import GenericEnvClient
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager
    from openenv_gateway.harness import AgentRun, CommandHarness, env_verdict

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("coding", None))()
    token = secrets.token_urlsafe(16)
    handle = provider.start(LaunchSpec(env="coding", max_sessions=concurrency * 2, token=token))
    errors: list[Any] = []
    graded: list[bool] = []
    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted"], ready_timeout_s=60) as upstream:
        gateway = CaptureGateway(upstream.base_url)
        gateway.start()
        harness = CommandHarness(gateway, [sys.executable, "-c", _AGENT], deadline_s=120, grade_reserve_s=30)

        def one(i: int) -> None:
            env = GenericEnvClient(handle.base_url, token=token).sync()
            try:
                def setup() -> str:
                    return str(env.reset(seed=i).observation.get("prompt", "write code"))

                def code(run: AgentRun) -> dict[str, Any]:
                    path = run.workdir / "solution.py"
                    return {"code": path.read_text() if path.exists() else "", "submit": True}

                judge = env_verdict(env, code)
                episode = harness.run(episode_id=f"coding-{i}", setup=setup, verdict=judge)
                if episode.error:
                    errors.append(episode.error)
                # graded: the env ended the episode on the submission (its reward is the hidden tests')
                graded.append(episode.verdict is not None and episode.verdict.done)
            finally:
                env.close()

        started = time.perf_counter()
        try:
            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(one, range(episodes)))
        finally:
            elapsed = time.perf_counter() - started
            gateway.stop()
            handle.stop()
    return {"episodes": episodes, "concurrency": concurrency, "seconds": round(elapsed, 2),
            "episodes_per_min": round(60.0 * episodes / elapsed, 1), "errors": len(errors), "graded": sum(graded),
            "first_error": errors[0] if errors else None}


def _ids_equal(calls: int) -> dict[str, Any]:
    import httpx

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        server, engine = model_server("--max-tokens-cap", "16"), "tiny transformers model server"
    except ImportError:
        server = ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted"], ready_timeout_s=60)
        engine = "scripted upstream (torch/transformers not installed)"
    equal = 0
    with server:
        gateway = CaptureGateway(server.base_url)
        gateway.start()
        try:
            key = gateway.open_episode("ids")
            for i in range(calls):
                body = {"model": "m", "messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 8,
                        "stream": i % 2 == 1}
                direct = httpx.post(server.base_url + "/v1/chat/completions", timeout=60,
                                    json={**body, "stream": False, "return_token_ids": True}).json()
                with httpx.stream("POST", gateway.base_url + "/v1/chat/completions", json=body, timeout=60,
                                  headers={"Authorization": f"Bearer {key}"}) as r:
                    for _ in r.iter_lines():
                        pass
                turn = gateway.trace(key).turns[-1]
                equal += (turn.prompt_ids == direct["prompt_token_ids"]
                          and turn.completion_ids == direct["choices"][0]["token_ids"])
        finally:
            gateway.stop()
    return {"engine": engine, "calls": calls, "ids_equal_pct": round(100.0 * equal / calls, 2)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (the CI run)")
    parser.add_argument("--calls", type=int, default=None)
    args = parser.parse_args(argv)
    calls = args.calls or (200 if args.quick else 2000)
    latency = _latency(calls)
    ids = _ids_equal(20 if args.quick else 100)
    rate = _harness_rate(32 if args.quick else 160)
    print("gateway: added latency per call vs calling the upstream directly (scripted upstream, p50)")
    print(f"{'mode':<8} {'direct ms':>10} {'gateway ms':>11} {'added ms':>9}  goal <= 1 ms")
    for mode in ("plain", "stream"):
        row = latency[mode]
        print(f"{mode:<8} {row['direct_p50_ms']:>10.3f} {row['gateway_p50_ms']:>11.3f} {row['added_p50_ms']:>9.3f}"
              f"  {'met' if row['added_p50_ms'] <= 1.0 else 'NOT met'}")
    print(f"gateway CPU per call (both modes): {latency['gateway_cpu_ms_per_call']:.3f} ms")
    print(f"ids equal to the engine's: {ids['ids_equal_pct']}% of {ids['calls']} calls ({ids['engine']})")
    print(f"command harness on the coding env, {rate['concurrency']} at once: {rate['episodes_per_min']} episodes/min "
          f"({rate['episodes']} episodes in {rate['seconds']} s, {rate['graded']} graded by the env, "
          f"{rate['errors']} with an error; scripted model)")
    if rate["first_error"]:
        print(f"  first error: {rate['first_error']}")
    out = Path("bench-results")
    out.mkdir(exist_ok=True)
    (out / "gateway.json").write_text(json.dumps({"latency": latency, "ids": ids, "harness": rate}, indent=2))


if __name__ == "__main__":
    main()
