"""Upstream 0.10's own clients drive OUR echo server (docs/protocol.md §9.1, §10 T1–T3, T8).

``upstream_side/drive_server.py`` runs in the upstream venv and records what upstream's
``GenericEnvClient``, a typed ``EnvClient`` subclass, ``.sync()`` and plain ``requests``/``httpx``
calls got back. It runs twice in parallel: against our server, and against upstream's own server
(``upstream_side/serve_upstream.py``) as the reference. Each test asserts concrete values on our
run and, where both envs behave alike, that upstream's client saw the same thing from both.
"""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
from compat_harness import TOKEN, UPSTREAM_SIDE, Servers, upstream_env

pytestmark = pytest.mark.compat

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
VALIDATION = "Server error: Invalid message (code: VALIDATION_ERROR)"
CAPACITY = (
    "Server error: Server at capacity: 1/1 sessions active. Cannot accept new connections. "
    "(code: CAPACITY_REACHED)"
)
READY_OBS = {"metadata": {}, "echoed_message": "ready", "message_length": 0}


def _drive(python: str, base: str, single: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [python, str(UPSTREAM_SIDE / "drive_server.py"), "--base-url", base, "--single-url", single,
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        env=upstream_env(),
    )


def _collect(proc: subprocess.Popen[str], what: str) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"upstream driver against {what} timed out:\n{err[-4000:]}")
    if proc.returncode != 0:
        pytest.fail(f"upstream driver against {what} exited {proc.returncode}:\n{err[-4000:]}")
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def runs(servers: Servers, upstream_python: str) -> dict[str, dict[str, Any]]:
    """``{"ours": results, "ref": results}``: the driver against our server and upstream's."""
    ours = _drive(upstream_python, servers.ours.url(), servers.ours_single.url(),
                  "--token-url", servers.ours_token.url(), "--token", TOKEN)
    ref = _drive(upstream_python, servers.upstream.url("main"), servers.upstream.url("single"))
    return {"ours": _collect(ours, "our server"), "ref": _collect(ref, "upstream's server")}


def scenario(runs: dict[str, dict[str, Any]], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ours, reference) results of one scenario; a scenario that crashed fails the test here."""
    ours, ref = runs["ours"][name], runs["ref"][name]
    assert "unexpected" not in ref, f"reference run broke (harness bug): {ref}"
    assert "unexpected" not in ours, f"upstream's client failed against our server: {ours}"
    return ours, ref


def normalized(value: Any) -> Any:
    """Drop what legitimately differs between the two servers: the reference env's extra state
    key ``instances``, random episode ids, pydantic doc URLs, float noise."""
    if isinstance(value, dict):
        return {k: normalized(v) for k, v in value.items() if k not in ("instances", "url")}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str) and UUID_RE.match(value):
        return "<uuid4>"
    if isinstance(value, float):
        return round(value, 9)
    return value


def test_generic_client_reset_step_state(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "generic_async")
    assert ours["reset"] == {"observation": READY_OBS, "observation_type": "dict", "reward": 0.0,
                             "done": False, "metadata": None}
    assert ours["state_after_reset"] == {"type": "dict", "episode_id": "ep-1", "step_count": 0}
    meta1 = {"original_message": "Hello", "step": 1}
    assert ours["step1"] == {
        "observation": {"metadata": meta1, "echoed_message": "Hello", "message_length": 5},
        "observation_type": "dict", "reward": 0.5, "done": False, "metadata": meta1,
    }
    assert ours["step2"]["observation"]["metadata"] == {"original_message": "Hi", "step": 2}
    assert ours["step2"]["reward"] == pytest.approx(0.2)
    assert ours["state"] == {"type": "dict", "episode_id": "ep-1", "step_count": 2}
    # a reset without episode_id starts a new episode with a fresh UUID4 id
    assert ours["reset_again"]["observation"] == READY_OBS
    assert UUID_RE.match(ours["state_after_second_reset"]["episode_id"])
    assert ours["state_after_second_reset"]["step_count"] == 0
    assert normalized(ours) == normalized(ref)


def test_typed_client_in_upstream_style(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "typed_async")
    assert ours["reset"]["observation_type"] == "EchoObservation"
    assert ours["reset"]["observation"] == {"done": False, "reward": 0.0, "metadata": {},
                                            "echoed_message": "ready", "message_length": 0}
    assert ours["step"]["observation"]["echoed_message"] == "Hello"
    assert ours["step"]["observation"]["metadata"] == {"original_message": "Hello", "step": 1}
    assert ours["step"]["reward"] == 0.5
    # our echo env does not cap the reward at 1.0 like upstream's template (0.1 * 15 = 1.5)
    assert ours["step_long"]["reward"] == pytest.approx(1.5)
    assert ours["state"] == {"type": "State", "episode_id": "typed-1", "step_count": 2}
    for key in ("reset", "step", "state"):
        assert normalized(ours[key]) == normalized(ref[key])


def test_invalid_action_raises_upstream_error_and_session_survives(
    runs: dict[str, dict[str, Any]],
) -> None:
    ours, ref = scenario(runs, "invalid_action")
    for case in ("too_short", "extra_key", "missing_field", "wrong_type"):
        assert ours[case] == {"raised": "RuntimeError", "message": VALIDATION}, case
    # the session survived four invalid frames: same episode, step_count counts valid steps only
    assert ours["step_after"]["observation"]["metadata"] == {"original_message": "second", "step": 2}
    assert ours["state"] == {"type": "dict", "episode_id": "inv-1", "step_count": 2}
    assert normalized(ours) == normalized(ref)


def test_capacity_refusal_reaches_upstream_client(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "capacity")
    # the handshake succeeds (upstream accepts first), the first operation gets the refusal
    assert ours["second_connect"] == "ok"
    assert ours["second_reset"] == {"raised": "RuntimeError", "message": CAPACITY}
    assert ours["holder_state"] == {"type": "dict", "episode_id": "holder", "step_count": 1}
    assert ours["slot_freed"] is True, ours.get("third_error")
    assert ours["third_reset"]["observation"] == READY_OBS
    drop = ("third_attempts", "third_error")
    assert normalized({k: v for k, v in ours.items() if k not in drop}) == normalized(
        {k: v for k, v in ref.items() if k not in drop}
    )


def test_concurrent_upstream_clients_get_separate_sessions(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "concurrent_sessions")
    assert ours == {"a": {"type": "dict", "episode_id": "A", "step_count": 3},
                    "b": {"type": "dict", "episode_id": "B", "step_count": 1}}
    assert normalized(ours) == normalized(ref)


def test_sync_wrapper_and_plain_script_calls(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "sync_wrapper")
    assert ours["wrapper_type"] == "SyncEnvClient"
    assert ours["reset"]["observation"]["echoed_message"] == "ready"
    assert ours["step"]["observation"]["echoed_message"] == "sync"
    assert ours["step"]["reward"] == pytest.approx(0.4)
    assert ours["state"] == {"type": "State", "episode_id": "sync-1", "step_count": 1}
    assert ours["plain_state"] == {"type": "dict", "episode_id": "plain-1", "step_count": 1}
    assert ours["plain_step"]["metadata"] == {"original_message": "abc", "step": 1}
    assert normalized(ours) == normalized(ref)


def _detail(resp: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in err.items() if k != "url"} for err in resp["body"]["detail"]]


def test_http_legacy_routes_in_upstream_shapes(runs: dict[str, dict[str, Any]]) -> None:
    ours, ref = scenario(runs, "http_legacy")
    assert ours["health"]["status"] == 200
    assert ours["health"]["body"] == {"status": "healthy"}

    assert ours["schema"]["status"] == 200
    assert ours["schema_model"] == "ok"  # upstream's SchemaResponse model accepts our /schema
    schema = ours["schema"]["body"]
    assert set(schema) == {"action", "observation", "state", "reset_observation"}
    action = schema["action"]
    assert action["additionalProperties"] is False
    assert "metadata" in action["properties"]
    assert action["properties"]["message"]["minLength"] == 1
    assert action["required"] == ["message"]
    assert {"echoed_message", "message_length", "reward", "done", "metadata"} <= set(
        schema["observation"]["properties"])
    assert {"episode_id", "step_count"} <= set(schema["state"]["properties"])

    assert ours["metadata"]["status"] == 200
    assert ours["metadata_model"] == "ok"
    assert set(ours["metadata"]["body"]) == {"name", "description", "readme_content", "version",
                                            "author", "documentation_url"}

    # T3: one-shot /reset and /step in upstream's bodies (float reward, metadata always present)
    assert ours["reset"]["status"] == 200
    assert ours["reset"]["body"] == {"observation": READY_OBS, "reward": 0.0, "done": False,
                                     "metadata": None}
    assert ours["reset_model"] == "ok"
    assert ours["reset_no_body"]["status"] == 200
    assert ours["reset_no_body"]["body"] == ours["reset"]["body"]
    meta = {"original_message": "Hello", "step": 1}
    assert ours["step"]["status"] == 200
    assert ours["step"]["body"] == {
        "observation": {"metadata": meta, "echoed_message": "Hello", "message_length": 5},
        "reward": 0.5, "done": False, "metadata": meta,
    }
    assert ours["step_model"] == "ok"
    # legacy responses say they are session-less (B1); the reference server sends no such header
    assert ours["reset"]["session_header"] == "none"
    assert ours["step"]["session_header"] == "none"

    assert ours["step_too_short"]["status"] == 422
    assert _detail(ours["step_too_short"]) == [{
        "type": "string_too_short", "loc": ["message"],
        "msg": "String should have at least 1 character", "input": "", "ctx": {"min_length": 1},
    }]
    assert ours["step_no_action"]["status"] == 422
    assert _detail(ours["step_no_action"]) == [{
        "type": "missing", "loc": ["body", "action"], "msg": "Field required",
        "input": {"message": "x"},
    }]
    assert ours["reset_negative_seed"]["status"] == 422
    assert _detail(ours["reset_negative_seed"]) == [{
        "type": "greater_than_equal", "loc": ["body", "seed"],
        "msg": "Input should be greater than or equal to 0", "input": -1, "ctx": {"ge": 0},
    }]
    # GET /state without a session: a fresh env, never the e1 episode of the /reset above
    assert ours["state"]["status"] == 200
    assert ours["state"]["body"]["step_count"] == 0
    assert ours["state"]["body"]["episode_id"] != "e1"
    assert ours["state_model"] == "ok"
    assert ours["wrong_method"]["status"] == 405
    assert ours["wrong_method"]["body"] == {"detail": "Method Not Allowed"}
    assert ours["httpx_step"]["status"] == 200
    assert ours["httpx_step"]["body"]["reward"] == pytest.approx(0.3)
    assert ours["httpx_state"]["status"] == 200

    for key in ("health", "reset", "reset_no_body", "step", "step_too_short", "step_no_action",
                "reset_negative_seed", "wrong_method", "httpx_step"):
        for part in ("status", "content_type", "body"):
            assert normalized(ours[key][part]) == normalized(ref[key][part]), (key, part)


def test_upstream_client_authenticates_with_headers(runs: dict[str, dict[str, Any]]) -> None:
    """Our token auth (§11 B16) is reachable from upstream's client through ``headers=``."""
    ours = runs["ours"]["auth"]
    assert "unexpected" not in ours, ours
    assert ours["reset"]["observation"] == READY_OBS
    assert ours["step"]["observation"]["echoed_message"] == "secret"
    assert ours["state"] == {"type": "dict", "episode_id": "auth-1", "step_count": 1}
    # refused before any session exists: upstream's client reports a failed connect
    for case in ("no_token", "wrong_token"):
        assert ours[case]["raised"] == "ConnectionError", ours[case]
        assert ours[case]["message"].startswith("Failed to connect to ws://127.0.0.1:"), ours[case]
        assert "401" in ours[case]["message"], ours[case]
    assert ours["http_health"]["status"] == 200  # readiness probes need no token
    assert ours["http_no_token"]["status"] == 401
    assert ours["http_token"]["status"] == 200
    assert ours["http_token"]["body"]["observation"] == READY_OBS
