"""The kubernetes provider on the test cluster: launch to ready, warm-pool acquire, steps/s by path.

``python -m bench.k8s_provider [--quick] [--kubeconfig PATH] [--launches N] [--steps N]`` prints
one JSON object:

* ``launch_to_ready_s`` – ``provider.start(spec)`` until it returns (Pod created, scheduled, run by
  the node, ``Ready``, port-forward opened, ``/health`` + one ``/ws`` round-trip through it); p50,
  min, max over ``--launches`` starts after one uncounted warm-up. Stopping is not timed.
* ``warm_pool_acquire_s`` – ``start`` with ``options={"warm_pool": 2}`` once the pool is full
  (the pool is refilled between acquisitions, untimed).
* ``steps_per_s`` – ``step`` frames on one WebSocket session, through the provider's access path
  (port-forward through the API server) and directly to the same server: a ``host_port`` Pod
  (hostNetwork, the server listening on 127.0.0.1 of this one-node cluster), so both paths reach the
  very same process.

Needs the cluster of ``.ci/k8s-setup.sh`` (kubeconfig ``/var/cache/openenv/k8s/kubeconfig``) and the
echo image (``openenv build envs/echo``); otherwise prints ``{"skipped": reason}``. Everything runs
in a namespace of its own, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
import uuid
from typing import Any

__all__ = ["main", "steps_per_second"]

DEFAULT_KUBECONFIG = "/var/cache/openenv/k8s/kubeconfig"


def _summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": statistics.median(values), "min": min(values), "max": max(values)}


def steps_per_second(base_url: str, token: str | None, steps: int) -> float:
    """``step`` frames per second on one session over raw ``/ws`` frames (after one reset)."""
    from websockets.sync.client import connect

    from openenv.urls import ws_base_url

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with connect(ws_base_url(base_url) + "/ws", additional_headers=headers, open_timeout=10, proxy=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        ws.recv(timeout=10)
        frame = json.dumps({"type": "step", "data": {"message": "bench"}})
        started = time.perf_counter()
        for _ in range(steps):
            ws.send(frame)
            ws.recv(timeout=10)
        elapsed = time.perf_counter() - started
        ws.send('{"type":"close"}')
    return steps / elapsed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(kubeconfig: str, launches: int, steps: int) -> dict[str, Any]:
    from kubernetes import client, config

    from openenv.interfaces import LaunchSpec
    from openenv_provider_kubernetes.provider import KubernetesProvider

    api = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api)
    namespace = f"openenv-bench-{uuid.uuid4().hex[:8]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not core.list_namespaced_service_account(namespace).items:
        time.sleep(0.2)
    provider = KubernetesProvider(kubeconfig=kubeconfig, namespace=namespace)
    result: dict[str, Any] = {"namespace": namespace}
    try:
        timings = []
        for i in range(launches + 1):
            started = time.perf_counter()
            handle = provider.start(LaunchSpec(env="echo", startup_timeout_s=120))
            elapsed = time.perf_counter() - started
            handle.stop()
            if i:
                timings.append(elapsed)
        result["launch_to_ready_s"] = _summary(timings)

        pool_spec = LaunchSpec(env="echo", token="bench", startup_timeout_s=120, options={"warm_pool": 2})
        provider.start(pool_spec).stop()  # creates and fills the pool
        (pool,) = provider._pools.values()
        acquires = []
        for _ in range(launches):
            if not pool.wait_full(180):
                raise RuntimeError(f"the warm pool did not fill: {pool.last_error}")
            started = time.perf_counter()
            handle = provider.start(pool_spec)
            acquires.append(time.perf_counter() - started)
            handle.stop()
        provider.close_pools()
        result["warm_pool_acquire_s"] = _summary(acquires)

        token = "bench-steps"
        handle = provider.start(LaunchSpec(env="echo", token=token, startup_timeout_s=120,
                                           options={"host_port": _free_port(), "service": False}))
        try:
            assert handle.direct_url is not None
            steps_per_second(handle.base_url, token, max(10, steps // 10))  # warm-up, both paths
            steps_per_second(handle.direct_url, token, max(10, steps // 10))
            result["steps_per_s"] = {
                "port_forward": steps_per_second(handle.base_url, token, steps),
                "direct": steps_per_second(handle.direct_url, token, steps),
                "steps": steps,
            }
        finally:
            handle.stop()
    finally:
        provider.close_pools()
        core.delete_namespace(namespace)
        api.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.k8s_provider", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 launch (after the warm-up) and 1 warm-pool "
                        "acquisition, 300 steps per path: each Pod start is seconds of CI time")
    parser.add_argument("--kubeconfig", default=os.environ.get("OPENENV_K8S_KUBECONFIG", DEFAULT_KUBECONFIG))
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args(argv)
    launches, steps = (1, 300) if args.quick else (max(1, args.launches), max(10, args.steps))
    if not os.path.isfile(args.kubeconfig):
        print(json.dumps({"skipped": f"no kubeconfig at {args.kubeconfig}: run .ci/k8s-setup.sh"}))
        return 0
    try:
        result = run(args.kubeconfig, launches, steps)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}))
        return 1
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
