"""The capture gateway's cost per model call, and whether what it captures is what the engine computed.

``python -m bench.gateway [--quick] [--calls N]``:

* **added latency** — a client process times ``--calls`` sequential chat completions (streaming and
  not) sent directly to an upstream and the same calls through the gateway, interleaved in rounds
  so a change in the machine's load falls on both; the row is the p50 difference. The upstream
  here is the *scripted* one (``openenv_gateway.testing.scripted``, in its own process): a model's
  compute would drown the gateway's overhead, so this row measures the gateway alone. The goal is
  at most 1 ms added at p50. The gateway runs in this process, the client and the upstream in two
  others, so no two of them share an interpreter lock.
* **ids equal** — the percentage of calls whose captured ``prompt_ids``/``completion_ids`` equal
  what the engine returned for the same request asked directly. With torch and transformers
  installed (``openenvkit-gateway[testmodel]``) the engine is the tiny-model server; without them
  the row is measured against the scripted upstream and says so.

Prints a table and writes ``bench-results/gateway.json``.
"""

from __future__ import annotations

import argparse
import json
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
            done = subprocess.run([sys.executable, "-c", _CLIENT, upstream.base_url, gateway.base_url, key,
                                   str(calls)], capture_output=True, text=True, timeout=600, check=True)
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
    return rows


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
    print("gateway: added latency per call vs calling the upstream directly (scripted upstream, p50)")
    print(f"{'mode':<8} {'direct ms':>10} {'gateway ms':>11} {'added ms':>9}  goal <= 1 ms")
    for mode in ("plain", "stream"):
        row = latency[mode]
        print(f"{mode:<8} {row['direct_p50_ms']:>10.3f} {row['gateway_p50_ms']:>11.3f} {row['added_p50_ms']:>9.3f}"
              f"  {'met' if row['added_p50_ms'] <= 1.0 else 'NOT met'}")
    print(f"ids equal to the engine's: {ids['ids_equal_pct']}% of {ids['calls']} calls ({ids['engine']})")
    out = Path("bench-results")
    out.mkdir(exist_ok=True)
    (out / "gateway.json").write_text(json.dumps({"latency": latency, "ids": ids}, indent=2))


if __name__ == "__main__":
    main()
