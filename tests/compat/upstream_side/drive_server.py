"""Drive an OpenEnv server with upstream 0.10's own clients and report what they saw, as JSON.

Runs in the upstream venv. The target is any server hosting a typed echo env (ours, or upstream's
``serve_upstream.py`` as the reference). Nothing is asserted here: every scenario records what
upstream's client returned or raised, and the pytest side asserts on the values::

    python drive_server.py --base-url http://127.0.0.1:P --single-url http://127.0.0.1:Q

``--single-url`` must point at a server with exactly one session slot (capacity scenario);
``--token-url URL --token T`` (a server requiring that bearer token) adds the ``auth`` scenario.
Output: one JSON object ``{scenario: result}`` on stdout; a scenario that raised unexpectedly
reports ``{"unexpected": "<Type>: <message>"}`` so the others still run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import requests
from echo_client import EchoEnv
from echo_env import EchoAction

from openenv.core import GenericAction, GenericEnvClient
from openenv.core.env_server.types import (
    EnvironmentMetadata,
    ResetResponse,
    SchemaResponse,
    State,
    StepResponse,
)

TIMEOUTS: dict[str, Any] = {"connect_timeout_s": 10.0, "message_timeout_s": 20.0}


def _raised(exc: BaseException) -> dict[str, Any]:
    return {"raised": type(exc).__name__, "message": str(exc)}


def _result(r: Any) -> dict[str, Any]:
    """A ``StepResult`` as plain JSON (typed observations dumped with ``model_dump``)."""
    obs = r.observation
    return {
        "observation": obs.model_dump() if hasattr(obs, "model_dump") else obs,
        "observation_type": type(obs).__name__,
        "reward": r.reward,
        "done": r.done,
        "metadata": r.metadata,
    }


def _state(s: Any) -> Any:
    return {"type": type(s).__name__, **(s.model_dump() if hasattr(s, "model_dump") else s)}


async def generic_async(args: argparse.Namespace) -> dict[str, Any]:
    """GenericEnvClient, async: reset with seed/episode_id, steps (dict and GenericAction), state."""
    base = args.base_url
    out: dict[str, Any] = {}
    async with GenericEnvClient(base_url=base, **TIMEOUTS) as env:
        out["reset"] = _result(await env.reset(seed=1, episode_id="ep-1"))
        out["state_after_reset"] = _state(await env.state())
        out["step1"] = _result(await env.step({"message": "Hello"}))
        out["step2"] = _result(await env.step(GenericAction(message="Hi")))
        out["state"] = _state(await env.state())
        out["reset_again"] = _result(await env.reset())
        out["state_after_second_reset"] = _state(await env.state())
    return out


async def typed_async(args: argparse.Namespace) -> dict[str, Any]:
    """A typed EnvClient subclass in upstream's documented style, async."""
    base = args.base_url
    out: dict[str, Any] = {}
    async with EchoEnv(base_url=base, **TIMEOUTS) as env:
        out["reset"] = _result(await env.reset(episode_id="typed-1", seed=7))
        out["step"] = _result(await env.step(EchoAction(message="Hello")))
        out["step_long"] = _result(await env.step(EchoAction(message="x" * 15)))
        out["state"] = _state(await env.state())
    return out


async def invalid_action(args: argparse.Namespace) -> dict[str, Any]:
    """Invalid actions raise upstream's RuntimeError; the session survives them."""
    base = args.base_url
    out: dict[str, Any] = {}
    async with GenericEnvClient(base_url=base, **TIMEOUTS) as env:
        await env.reset(episode_id="inv-1")
        out["step_before"] = _result(await env.step({"message": "first"}))
        for name, action in (
            ("too_short", {"message": ""}),
            ("extra_key", {"message": "hi", "bogus": 1}),
            ("missing_field", {}),
            ("wrong_type", {"message": ["not", "a", "string"]}),
        ):
            try:
                out[name] = {"returned": _result(await env.step(action))}
            except Exception as exc:
                out[name] = _raised(exc)
        out["step_after"] = _result(await env.step({"message": "second"}))
        out["state"] = _state(await env.state())
    return out


async def capacity(args: argparse.Namespace) -> dict[str, Any]:
    """Against a one-slot server: the second client connects, then its first call is refused."""
    single = args.single_url
    out: dict[str, Any] = {}
    holder = GenericEnvClient(base_url=single, **TIMEOUTS)
    await holder.connect()
    out["holder_reset"] = _result(await holder.reset(episode_id="holder"))
    second = GenericEnvClient(base_url=single, **TIMEOUTS)
    try:
        await second.connect()
        out["second_connect"] = "ok"
    except Exception as exc:
        out["second_connect"] = _raised(exc)
    try:
        out["second_reset"] = {"returned": _result(await second.reset())}
    except Exception as exc:
        out["second_reset"] = _raised(exc)
    await second.close()
    out["holder_step"] = _result(await holder.step({"message": "still here"}))
    out["holder_state"] = _state(await holder.state())
    await holder.close()
    # Closing frees the slot, but the server finishes tearing the session down after the close
    # handshake; retry (bounded) until a newcomer gets in.
    out["slot_freed"] = False
    for attempt in range(50):
        third = GenericEnvClient(base_url=single, **TIMEOUTS)
        try:
            out["third_reset"] = _result(await third.reset(episode_id="third"))
            out["slot_freed"] = True
            out["third_attempts"] = attempt + 1
            break
        except RuntimeError as exc:
            out["third_error"] = str(exc)
            await asyncio.sleep(0.1)
        finally:
            await third.close()
    return out


async def concurrent_sessions(args: argparse.Namespace) -> dict[str, Any]:
    """Two upstream clients at once get independent sessions."""
    base = args.base_url
    out: dict[str, Any] = {}
    async with (
        GenericEnvClient(base_url=base, **TIMEOUTS) as a,
        GenericEnvClient(base_url=base, **TIMEOUTS) as b,
    ):
        await asyncio.gather(a.reset(episode_id="A"), b.reset(episode_id="B"))
        for i in range(3):
            await a.step({"message": f"a{i}"})
        await b.step({"message": "b0"})
        sa, sb = await asyncio.gather(a.state(), b.state())
        out["a"], out["b"] = _state(sa), _state(sb)
    return out


def sync_wrapper(args: argparse.Namespace) -> dict[str, Any]:
    """``.sync()`` (typed) and direct calls without a running loop (generic), as scripts do."""
    base = args.base_url
    out: dict[str, Any] = {}
    with EchoEnv(base_url=base, **TIMEOUTS).sync() as env:
        out["wrapper_type"] = type(env).__name__
        out["reset"] = _result(env.reset(episode_id="sync-1"))
        out["step"] = _result(env.step(EchoAction(message="sync")))
        out["state"] = _state(env.state())
    plain = GenericEnvClient(base_url=base, **TIMEOUTS)
    try:
        out["plain_reset"] = _result(plain.reset(episode_id="plain-1"))
        out["plain_step"] = _result(plain.step({"message": "abc"}))
        out["plain_state"] = _state(plain.state())
    finally:
        plain.close()
    return out


def _http(resp: Any) -> dict[str, Any]:
    ctype = resp.headers.get("content-type", "")
    body: Any = resp.json() if ctype.startswith("application/json") else resp.text
    return {
        "status": resp.status_code,
        "content_type": ctype.split(";")[0],
        "body": body,
        # our server marks legacy one-shot responses (docs/protocol.md §11 B1); upstream sends no such header
        "session_header": resp.headers.get("openenv-session"),
    }


def _validates(model: Any, body: Any) -> str:
    """``"ok"`` when upstream's own response model accepts ``body``, else the error text."""
    try:
        model.model_validate(body)
        return "ok"
    except Exception as exc:
        return str(exc)


def http_legacy(args: argparse.Namespace) -> dict[str, Any]:
    """The HTTP routes as third-party tooling calls them, in upstream's shapes (docs/protocol.md §5, T3)."""
    base = args.base_url
    out: dict[str, Any] = {}
    with requests.Session() as s:
        s.trust_env = False  # loopback only; never through a proxy
        out["health"] = _http(s.get(f"{base}/health", timeout=10))
        schema = _http(s.get(f"{base}/schema", timeout=10))
        out["schema"] = schema
        out["schema_model"] = _validates(SchemaResponse, schema["body"])
        meta = _http(s.get(f"{base}/metadata", timeout=10))
        out["metadata"] = meta
        out["metadata_model"] = _validates(EnvironmentMetadata, meta["body"])
        reset = _http(s.post(f"{base}/reset", json={"seed": 1, "episode_id": "e1"}, timeout=10))
        out["reset"] = reset
        out["reset_model"] = _validates(ResetResponse, reset["body"])
        out["reset_no_body"] = _http(s.post(f"{base}/reset", timeout=10))
        step = _http(s.post(
            f"{base}/step",
            json={"action": {"message": "Hello"}, "timeout_s": 5, "request_id": "r1"},
            timeout=10,
        ))
        out["step"] = step
        out["step_model"] = _validates(StepResponse, step["body"])
        out["step_too_short"] = _http(s.post(f"{base}/step", json={"action": {"message": ""}},
                                             timeout=10))
        out["step_no_action"] = _http(s.post(f"{base}/step", json={"message": "x"}, timeout=10))
        out["reset_negative_seed"] = _http(s.post(f"{base}/reset", json={"seed": -1}, timeout=10))
        state = _http(s.get(f"{base}/state", timeout=10))
        out["state"] = state
        out["state_model"] = _validates(State, state["body"])
        out["wrong_method"] = _http(s.get(f"{base}/step", timeout=10))
    with httpx.Client(trust_env=False, timeout=10) as client:
        out["httpx_step"] = _http(client.post(f"{base}/step", json={"action": {"message": "hey"}}))
        out["httpx_state"] = _http(client.get(f"{base}/state"))
    return out


async def auth(args: argparse.Namespace) -> dict[str, Any]:
    """A token-protected server: upstream clients authenticate with ``headers=`` (docs/protocol.md §11 B16)."""
    url, token = args.token_url, args.token
    out: dict[str, Any] = {}
    good = {"Authorization": f"Bearer {token}"}
    async with GenericEnvClient(base_url=url, headers=good, **TIMEOUTS) as env:
        out["reset"] = _result(await env.reset(episode_id="auth-1"))
        out["step"] = _result(await env.step({"message": "secret"}))
        out["state"] = _state(await env.state())
    for name, headers in (("no_token", None), ("wrong_token", {"Authorization": "Bearer nope"})):
        env = GenericEnvClient(base_url=url, headers=headers, **TIMEOUTS)
        try:
            await env.connect()
            out[name] = {"returned": _result(await env.reset())}
        except Exception as exc:
            out[name] = _raised(exc)
        finally:
            await env.close()
    with requests.Session() as s:
        s.trust_env = False
        out["http_health"] = _http(s.get(f"{url}/health", timeout=10))
        out["http_no_token"] = _http(s.post(f"{url}/reset", json={}, timeout=10))
        out["http_token"] = _http(s.post(f"{url}/reset", json={}, headers=good, timeout=10))
    return out


Scenario = Callable[[argparse.Namespace], Awaitable[dict[str, Any]] | dict[str, Any]]
SCENARIOS: dict[str, Scenario] = {
    "generic_async": generic_async,
    "typed_async": typed_async,
    "invalid_action": invalid_action,
    "capacity": capacity,
    "concurrent_sessions": concurrent_sessions,
    "sync_wrapper": sync_wrapper,
    "http_legacy": http_legacy,
}
#: Scenarios that need a server the reference run does not have; run only when asked for.
OPTIONAL: dict[str, Scenario] = {"auth": auth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--single-url", required=True)
    parser.add_argument("--token-url", help="a server requiring --token (enables 'auth')")
    parser.add_argument("--token")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    if args.token_url and not args.only:
        names.append("auth")
    results: dict[str, Any] = {}
    for name in names:
        fn = SCENARIOS.get(name) or OPTIONAL[name]
        try:
            value = fn(args)
            if asyncio.iscoroutine(value):
                # a fresh loop per scenario: the sync scenarios run their own background loops
                value = asyncio.run(asyncio.wait_for(value, timeout=60))
            results[name] = value
        except BaseException as exc:  # report, keep going: one broken scenario must not hide others
            traceback.print_exc(file=sys.stderr)
            results[name] = {"unexpected": f"{type(exc).__name__}: {exc}"}
            if isinstance(exc, KeyboardInterrupt):
                break
    json.dump(results, sys.stdout, default=repr)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
