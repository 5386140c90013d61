"""Tool environments: schemas, registration rules, modes, validation, error classes, dispatch.

Everything runs in process; the session manager is the real one (no transport needed).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs this one on Python 3.11

from openenv.errors import ConfigError, RuleViolation, ValidationError
from openenv.sessions import SessionManager
from openenv.tools import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    Tool,
    ToolCallError,
    ToolEnvironment,
    ToolErrorType,
    ToolRegistry,
    build_spec,
    dispatch_action,
    parse_docstring,
    tool,
)
from openenv.types import Action, Observation

# -- schema derivation ----------------------------------------------------------------------------


class Point(BaseModel):
    x: int
    y: int = 0


class Summary(TypedDict):
    total: int
    label: str


def rich(xs: list[int], weights: dict[str, float], label: str | None = None,
         kind: Literal["a", "b"] = "a", at: Point | None = None,
         note: Annotated[str, Field(description="A note from Annotated")] = "",
         json: int = 1) -> Summary:
    """Summarise numbers.

    Longer explanation that is part of the description.

    Args:
        xs: The numbers to add
            (continued on the next line).
        weights (dict): Weight per label.
        label: Optional label.
        note: Ignored here: Annotated wins.

    Returns:
        The summary.
    """
    return {"total": sum(xs), "label": label or kind}


def test_schema_covers_lists_dicts_optionals_literals_models_defaults_and_descriptions() -> None:
    spec = build_spec(rich)
    schema = spec.input_schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["xs"] == {"type": "array", "items": {"type": "integer"},
                           "description": "The numbers to add (continued on the next line)."}
    assert props["weights"]["type"] == "object"
    assert props["weights"]["additionalProperties"] == {"type": "number"}
    assert props["weights"]["description"] == "Weight per label."
    assert props["label"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert props["label"]["default"] is None
    assert props["kind"]["enum"] == ["a", "b"] and props["kind"]["default"] == "a"
    assert props["at"]["anyOf"][0] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x"]
    assert props["note"]["description"] == "A note from Annotated"
    assert props["json"] == {"type": "integer", "default": 1}  # no clash with BaseModel.json
    assert schema["required"] == ["xs", "weights"]
    assert "title" not in schema and all("title" not in p for p in props.values())
    assert spec.description == "Summarise numbers.\n\nLonger explanation that is part of the description."
    # A TypedDict return is an object: the result is not wrapped.
    assert spec.output_schema is not None and spec.output_schema["type"] == "object"
    assert set(spec.output_schema["properties"]) == {"total", "label"}


def test_scalar_returns_are_wrapped_and_kwargs_allow_extra_arguments() -> None:
    def count(**extra: Any) -> int:
        return len(extra)

    spec = build_spec(count)
    assert spec.input_schema["additionalProperties"] is True
    assert spec.output_schema == {"type": "object", "properties": {"result": {"type": "integer"}},
                                  "required": ["result"], "x-fastmcp-wrap-result": True}
    assert spec.validate({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    result = spec.serialize(3)
    assert result.to_wire() == {"content": [{"type": "text", "text": "3"}], "structured_content": {"result": 3},
                                "data": 3, "is_error": False}


def test_docstring_parsing_google_and_sphinx() -> None:
    desc, params = parse_docstring("""Do it.

        Args:
            a (int): First.
            b: Second,
                continued.
        Raises:
            ValueError: never a parameter.
        """)
    assert desc == "Do it."
    assert params == {"a": "First.", "b": "Second, continued."}
    desc, params = parse_docstring("Do it.\n\n:param a: First.\n:param int b: Second.\n:returns: x")
    assert desc == "Do it." and params == {"a": "First.", "b": "Second."}


def test_arguments_are_validated_and_coerced_before_the_call() -> None:
    calls: list[dict[str, Any]] = []

    def add(a: int, b: int = 2) -> int:
        calls.append({"a": a, "b": b})
        return a + b

    registry = ToolRegistry()
    registry.add(add)
    for bad in ({"a": "x"}, {}, {"a": 1, "c": 3}, {"a": [1]}):
        with pytest.raises(ToolCallError) as info:
            registry.call("add", bad, mode="simulation")
        assert info.value.error_type is ToolErrorType.INVALID_ARGS
        assert "Invalid arguments for tool 'add'" in info.value.message
    assert calls == []  # never called with bad arguments
    _, value = registry.call("add", {"a": "5"}, mode="simulation")
    assert value == 7 and calls == [{"a": 5, "b": 2}]
    with pytest.raises(ToolCallError, match="expected an object"):
        registry.call("add", [1, 2], mode="simulation")


# -- registration rules ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["reset", "step", "state", "close"])
def test_reserved_names_are_refused_at_every_registration(name: str) -> None:
    with pytest.raises(RuleViolation, match="reserved"):
        tool(name=name)(lambda: None)

    def fn() -> None: ...

    fn.__name__ = name
    with pytest.raises(RuleViolation, match="reserved"):
        ToolRegistry().add(fn)

    class Env(ToolEnvironment):
        pass

    with pytest.raises(RuleViolation, match="control protocol"):
        Env().add_tool(lambda: 1, name=name)  # at run time too, not only at construction


def test_bad_names_modes_and_signatures_are_refused() -> None:
    with pytest.raises(RuleViolation, match="invalid"):
        tool(name="has space")(lambda: None)
    with pytest.raises(ConfigError, match="Invalid mode"):
        tool(mode="staging")(lambda: None)

    def positional(a: int, /) -> int:
        return a

    with pytest.raises(RuleViolation, match="named arguments"):
        build_spec(positional)


def test_mode_variants_and_overlaps() -> None:
    registry = ToolRegistry()
    registry.add(lambda: "prod", name="probe", mode="production")
    registry.add(lambda: "sim", name="probe", mode="simulation")
    registry.add(lambda: "any", name="always")
    assert [s.name for s in registry.visible("simulation")] == ["probe", "always"]
    assert registry.call("probe", {}, mode="production")[1] == "prod"
    assert registry.call("probe", {}, mode="simulation")[1] == "sim"
    with pytest.raises(RuleViolation, match="already registered"):
        registry.add(lambda: "x", name="probe")  # every mode overlaps both variants
    with pytest.raises(RuleViolation, match="already registered"):
        registry.add(lambda: "x", name="always", mode="production")
    registry.remove("probe", "production")
    with pytest.raises(ToolCallError) as info:
        registry.call("probe", {}, mode="production")
    assert info.value.error_type is ToolErrorType.TOOL_NOT_FOUND
    assert info.value.message.startswith("Tool 'probe' not available in production mode")


# -- error classification -------------------------------------------------------------------------


class Tools(ToolEnvironment):
    tool_timeout_s = 5.0

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    @tool
    def echo_message(self, message: str) -> str:
        """Echo back the provided message."""
        return message

    @tool
    def lookup(self, key: str) -> str:
        raise KeyError(f"key {key} not found in table")  # upstream would call this tool_not_found

    @tool
    def own_timeout(self) -> str:
        raise TimeoutError("the backend timed out")  # the body's, not the deadline

    @tool
    def picky(self, n: int) -> int:
        raise ToolCallError("invalid_args", "n must be even")

    @tool(timeout_s=0.2)
    def hang(self) -> None:
        self.release.wait(10)  # bounded; released by the test

    @tool(timeout_s=0.2)
    async def ahang(self) -> None:
        await asyncio.sleep(10)

    @tool(mode="production")
    def secret(self) -> str:
        return "prod only"

    @tool(mode="simulation")
    def rewind(self) -> str:
        """Simulation control."""
        return "sim only"


def _call(env: ToolEnvironment, name: str, **arguments: Any) -> CallToolObservation:
    obs = env.step(CallToolAction(tool_name=name, arguments=arguments))
    assert isinstance(obs, CallToolObservation)
    return obs


def test_errors_are_classified_by_where_they_happen() -> None:
    env = Tools()
    try:
        cases = {
            ("nope", ()): (ToolErrorType.TOOL_NOT_FOUND, "Unknown tool: 'nope'"),
            ("echo_mesage", ()): (ToolErrorType.TOOL_NOT_FOUND, "Did you mean 'echo_message'?"),
            ("echo_message", ("message", 5)): (ToolErrorType.INVALID_ARGS, "message: Input should be a valid string"),
            ("echo_message", ()): (ToolErrorType.INVALID_ARGS, "message: Field required"),
            ("lookup", ("key", "k")): (ToolErrorType.EXECUTION_ERROR, "Error calling tool 'lookup': 'key k not found"),
            ("own_timeout", ()): (ToolErrorType.EXECUTION_ERROR, "the backend timed out"),
            ("picky", ("n", 1)): (ToolErrorType.INVALID_ARGS, "n must be even"),
            ("hang", ()): (ToolErrorType.TIMEOUT, "Tool 'hang' timed out after 0.2 seconds"),
            ("secret", ()): (ToolErrorType.TOOL_NOT_FOUND, "not available in simulation mode"),
        }
        for (name, kv), (kind, text) in cases.items():
            obs = _call(env, name, **dict([kv] if kv else []))
            assert obs.error is not None, name
            assert obs.error.error_type is kind, (name, obs.error)
            assert text in obs.error.message, (name, obs.error.message)
            assert obs.result is None and obs.reward is None and obs.done is False
        assert _call(env, "echo_message", message="ok").result["data"] == "ok"  # still usable
    finally:
        env.release.set()
        env.close()


async def test_async_path_enforces_deadlines_and_cancels_async_tools() -> None:
    env = Tools()
    assert Tools.is_async()  # an async tool makes the env async
    try:
        obs = await env.step_async(CallToolAction(tool_name="ahang"))
        assert obs.error is not None and obs.error.error_type is ToolErrorType.TIMEOUT
        obs = await env.step_async(CallToolAction(tool_name="hang"))
        assert obs.error is not None and obs.error.error_type is ToolErrorType.TIMEOUT
        obs = await env.step_async(CallToolAction(tool_name="echo_message", arguments={"message": "x"}))
        assert obs.error is None and obs.result["structured_content"] == {"result": "x"}
        # the sync path can run async tools too (no loop in this worker thread)
        obs = await asyncio.to_thread(env.step, CallToolAction(tool_name="ahang"))
        assert obs.error is not None and obs.error.error_type is ToolErrorType.TIMEOUT
    finally:
        env.release.set()
        env.close()


# -- renderings and dispatch ----------------------------------------------------------------------


def test_one_registry_two_renderings() -> None:
    env = Tools()
    obs = env.step(ListToolsAction())
    assert isinstance(obs, ListToolsObservation) and obs.reward is None and obs.done is False
    names = [t.name for t in obs.tools]
    assert "rewind" in names and "secret" not in names
    for entry in obs.model_dump()["tools"]:
        assert set(entry) == {"name", "description", "input_schema"}
        Tool.model_validate(entry)  # upstream's strict model accepts it
    mcp = {s.name: s.mcp_entry() for s in env.list_tools()}
    assert all(set(e) == {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}
               for e in mcp.values())
    assert mcp["echo_message"]["description"] == "Echo back the provided message."
    env.mode = "production"  # what the session manager sets
    assert "secret" in [s.name for s in env.list_tools()] and "rewind" not in [s.name for s in env.list_tools()]


def test_action_dispatch_follows_spec_2_5() -> None:
    adapter = Tools.action_type
    assert isinstance(adapter.model_validate({"type": "list_tools"}), ListToolsAction)
    call = adapter.model_validate({"tool_name": "echo_message"})  # type defaults to call_tool
    assert isinstance(call, CallToolAction) and call.arguments == {}
    with pytest.raises(ValidationError) as info:
        adapter.model_validate({"message": "not a tool action"})
    assert {(e["type"], tuple(e["loc"])) for e in info.value.errors} == {
        ("missing", ("tool_name",)), ("extra_forbidden", ("message",))}
    schema = adapter.model_json_schema()
    assert len(schema["oneOf"]) == 2 and schema["discriminator"] == {"propertyName": "type"}
    assert schema["title"] == "Action"  # how peers (verifiers) recognise a tool env, as upstream's

    class Say(Action):
        text: str

    assert "title" not in adapter.accepting(Say).model_json_schema()  # takes Say too: not a pure tool env
    assert isinstance(dispatch_action({"text": "hi"}, Say), Say)
    assert isinstance(dispatch_action({"type": "call_tool", "tool_name": "t"}, Say), CallToolAction)


class Chat(ToolEnvironment[Any, Observation, Any]):
    """A tool env with an action type of its own and a reward hook."""

    class Say(Action):
        text: str

    other_action_type = Say

    def __init__(self) -> None:
        super().__init__()
        self.rewarded: list[tuple[str, Any]] = []

    @tool
    def finish(self, answer: str) -> str:
        return answer

    def step_other(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        assert isinstance(action, Chat.Say)
        return Observation(reward=0.5, metadata={"heard": action.text})

    def reward_for_tool_call(self, tool_name: str, arguments: dict[str, Any], result: Any,
                             error: Any) -> tuple[float | None, bool]:
        self.rewarded.append((tool_name, result))
        return (1.0, True) if result == "42" else (0.0, False)


def test_other_actions_and_reward_hook() -> None:
    env = Chat()
    say = Chat.action_type.model_validate({"text": "hello"})
    obs = env.step(say)
    assert obs.metadata == {"heard": "hello"} and obs.reward == 0.5
    obs = env.step(Chat.action_type.model_validate({"type": "call_tool", "tool_name": "finish",
                                                    "arguments": {"answer": "42"}}))
    assert (obs.reward, obs.done) == (1.0, True)
    obs = env.step(CallToolAction(tool_name="finish"))  # invalid: the hook still sees it
    assert (obs.reward, obs.done) == (0.0, False) and obs.error is not None
    assert env.rewarded == [("finish", "42"), ("finish", None)]
    assert env.state.step_count == 3


async def test_session_manager_passes_the_server_mode_to_tool_envs() -> None:
    for mode, visible, hidden in (("production", "secret", "rewind"), ("simulation", "rewind", "secret")):
        manager = SessionManager(Tools, mode=mode, idle_timeout_s=None)
        session = await manager.open()
        try:
            obs = await manager.step(session, {"type": "list_tools"})
            names = [t.name for t in obs.tools]
            assert visible in names and hidden not in names
            obs = await manager.step(session, {"type": "call_tool", "tool_name": hidden})
            assert obs.error.error_type == "tool_not_found"
            obs = await manager.step(session, {"tool_name": visible})
            assert obs.error is None
            with pytest.raises(ValidationError):
                await manager.step(session, {"type": "call_tool", "tool_name": visible, "arguments": [1]})
        finally:
            session.env.release.set()
            await manager.shutdown()
