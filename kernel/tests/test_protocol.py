"""``openenv.protocol``: hello parsing, reply checks, and the rule that the frame vocabulary is
spelled only there (the client, the client transports and the readiness probe name it from it)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from openenv import protocol
from openenv.errors import ProtocolError
from openenv.protocol import Hello, expect, expect_list, hello_frame, parse_hello, reward

REPO = Path(__file__).resolve().parents[2]
FRAME_TYPES = frozenset(value for name, value in vars(protocol).items() if name.startswith("T_"))

#: Modules that speak frames and must take every frame type from ``openenv.protocol``.
SPEAKERS = [
    "kernel/src/openenv/client.py",
    "kernel/src/openenv/client_vector.py",
    "kernel/src/openenv/client_sync.py",
    "kernel/src/openenv/client_connect.py",
    "kernel/src/openenv/readiness.py",
    "plugins/transport-ws/src/openenv_transport_ws/client.py",
    "plugins/transport-ws/src/openenv_transport_ws/frames.py",
    "plugins/transport-rest/src/openenv_transport_rest/client.py",
    "plugins/transport-mcp/src/openenv_transport_mcp/client.py",
    "plugins/transport-ws/src/openenv_transport_ws/server.py",
    "plugins/transport-ws/src/openenv_transport_ws/connection.py",
    "plugins/provider-docker/src/openenv_provider_docker/testing.py",
    "kernel/src/openenv/testing/transport_contract.py",
]


def test_parse_hello_reads_what_the_server_granted() -> None:
    hello = parse_hello({"type": "hello", "data": {
        "session_id": "s-1", "extensions": ["step_batch", "sessions", 7], "protocol": protocol.PROTOCOL,
        "max_message_bytes": 1024, "max_batch_actions": 64}})
    assert hello == Hello(extensions=frozenset({"step_batch", "sessions"}), session_id="s-1",
                          protocol="openenv-ws/2", max_message_bytes=1024, max_batch_actions=64)
    # malformed fields read as absent, never as a wrong value
    odd = parse_hello({"type": "hello", "data": {"extensions": "all", "session_id": 3,
                                                 "max_batch_actions": True, "max_message_bytes": -1}})
    assert odd == Hello()
    with pytest.raises(ProtocolError, match="Expected a 'hello' frame, got 'error'"):
        parse_hello({"type": "error", "data": {"code": "UNKNOWN_TYPE"}})


def test_hello_frame_asks_for_what_the_client_uses() -> None:
    assert hello_frame() == {"type": "hello", "data": {"want": [
        "step_kwargs", "step_batch", "sessions", "tasks", "snapshot"]}}
    assert set(protocol.CLIENT_WANTS) <= set(protocol.EXTENSIONS)


def test_expect_and_expect_list_refuse_what_is_not_the_frame_asked_for() -> None:
    assert expect({"type": "state", "data": {"step_count": 1}}, "state") == {"step_count": 1}
    with pytest.raises(ProtocolError, match="Malformed 'state' frame"):
        expect({"type": "state", "data": []}, "state")
    assert expect_list({"type": "observations", "data": [{"a": 1}]}, length=1) == [{"a": 1}]
    with pytest.raises(ProtocolError, match="with 2 elements"):
        expect_list({"type": "observations", "data": [{"a": 1}]}, length=2)
    with pytest.raises(ProtocolError, match="Malformed element"):
        expect_list({"type": "observations", "data": [1]})


def test_reward() -> None:
    assert reward(None) is None and reward(True) == 1.0 and reward(False) == 0.0 and reward(2) == 2.0
    for bad in (float("nan"), "1"):
        with pytest.raises(ProtocolError):
            reward(bad)


def _frame_type_literals(path: Path) -> list[str]:
    """Frame types written as string literals where a frame is built or its type compared."""
    found: list[str] = []

    def literal(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in FRAME_TYPES:
            return node.value
        return None

    def is_type_lookup(node: ast.AST) -> bool:  # x.get("type") / x["type"]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "type"
        return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and node.slice.value == "type"

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "type" and (hit := literal(value)):
                    found.append(f"{path.name}:{node.lineno}: {{'type': {hit!r}}}")
        elif isinstance(node, ast.Compare) and (is_type_lookup(node.left)
                                                or any(is_type_lookup(c) for c in node.comparators)):
            for side in (node.left, *node.comparators):
                if hit := literal(side):
                    found.append(f"{path.name}:{node.lineno}: compares a frame type with {hit!r}")
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id in {"kind", "ftype"}:
            for side in node.comparators:
                if hit := literal(side):
                    found.append(f"{path.name}:{node.lineno}: {node.left.id} == {hit!r}")
    return found


@pytest.mark.parametrize("relpath", SPEAKERS)
def test_frame_types_are_named_from_openenv_protocol(relpath: str) -> None:
    path = REPO / relpath
    if not path.exists():
        pytest.skip(f"{relpath} is not in this checkout")
    assert _frame_type_literals(path) == [], (
        "write frame types as openenv.protocol constants (T_STEP, T_OBSERVATION, ...), not literals")


def test_the_checker_finds_literals(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('a = {"type": "step_batch", "data": {}}\nif r.get("type") == "observations": pass\n'
                      'if kind == "reset": pass\nb = {"type": "list_tools"}\n', encoding="utf-8")
    assert len(_frame_type_literals(sample)) == 3  # an action type (list_tools) is not a frame type


@pytest.mark.requires_plugins("transport-ws")
def test_ws_frames_reexports_the_vocabulary() -> None:
    from openenv_transport_ws import frames

    assert frames.PROTOCOL is protocol.PROTOCOL
    assert frames.EXTENSIONS is protocol.EXTENSIONS
    assert set(frames.ENVELOPE_KEYS) | set(frames.SESSIONS_KEYS) <= FRAME_TYPES


def test_the_protocol_version_is_spelled_once() -> None:
    spelled = [str(p.relative_to(REPO)) for root in ("kernel/src", "plugins")
               for p in (REPO / root).rglob("*.py")
               if "/tests/" not in str(p) and protocol.PROTOCOL in p.read_text(encoding="utf-8")]
    assert spelled == ["kernel/src/openenv/protocol.py"]
