"""The office env: tools over the session manager, bad input, the user simulators, the contract,
the served MCP path and ``openenv validate``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import openenv_env_office.plugin
from openenv.errors import ConfigError, ValidationError
from openenv.plugins import PluginManager
from openenv.sessions import SessionManager
from openenv.testing import EnvContract
from openenv.tools import CallToolObservation, ListToolsObservation
from openenv_env_office.env import OfficeEnv
from openenv_env_office.tasks import TASKS
from openenv_env_office.user import DONT_KNOW, LlmUser, ScriptedUser, UserSimulatorError, user_from_env

TOOLS = ["list_events", "create_event", "update_event", "delete_event", "search_emails", "read_email",
         "send_email", "list_contacts", "add_contact", "list_todos", "add_todo", "complete_todo", "ask_user",
         "finish"]


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_name": tool, "arguments": arguments}


def test_registered_lazily_as_office_with_its_rubric() -> None:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_env_office.plugin)
    assert pm.catalog.envs.get("office").ref == "openenv_env_office.env:OfficeEnv"
    assert pm.catalog.rubrics.get("office_checks").ref == "openenv_env_office.rubrics:OfficeChecks"


async def test_tools_and_bad_input_through_the_session_manager() -> None:
    manager = SessionManager(OfficeEnv, max_sessions=2, idle_timeout_s=None)
    session = await manager.open()
    try:
        obs = await manager.reset(session, {"seed": 0})
        assert obs.request == TASKS[0].request and obs.today == TASKS[0].today and obs.weekday == "Monday"
        listed = await manager.step(session, {"type": "list_tools"})
        assert isinstance(listed, ListToolsObservation)
        assert [t["name"] for t in listed.model_dump()["tools"]] == TOOLS

        async def step(tool: str, **arguments: Any) -> CallToolObservation:
            result = await manager.step(session, call(tool, **arguments))
            assert isinstance(result, CallToolObservation)
            return result

        missing = await step("create_event", title="x")
        assert missing.error.error_type == "invalid_args" and missing.reward == 0.0
        wrong_type = await step("delete_event", event_id="first")
        assert wrong_type.error.error_type == "invalid_args"
        unknown = await step("delete_event", event_id=999)
        assert unknown.error.error_type == "invalid_args"
        assert "no event with id 999" in unknown.error.message and "list_events" in unknown.error.message
        bad_date = await step("list_events", date_from="next tuesday", date_to="2026-03-09")
        assert "YYYY-MM-DD" in bad_date.error.message and "date_from='2026-03-02'" in bad_date.error.message
        bad_time = await step("create_event", title="x", start="3pm", end="2026-03-03T16:00")
        assert "YYYY-MM-DDTHH:MM" in bad_time.error.message
        backwards = await step("create_event", title="x", start="2026-03-03T16:00", end="2026-03-03T15:00")
        assert "not after start" in backwards.error.message
        who = TASKS[0].cast[0]
        by_name = await step("send_email", to=[who["name"]], subject="s", body="b")
        assert f"did you mean {who['email']!r}" in by_name.error.message
        no_tool = await step("book_flight")
        assert no_tool.error.error_type == "tool_not_found"
        # The session is still usable, and nothing above changed the database.
        events = await step("list_events", date_from="2026-02-01", date_to="2026-04-30")
        assert events.error is None and len(events.result["data"]) == 4
        made = await step("create_event", title="Sync", start="2026-03-03 15:00", end="2026-03-03T15:30",
                          attendees=[who["email"]])
        assert made.result["data"]["start"] == "2026-03-03T15:00" and made.result["data"]["attendees"] == [who["email"]]
        moved = await step("update_event", event_id=made.result["data"]["id"], start="2026-03-04T09:00")
        assert (moved.result["data"]["start"], moved.result["data"]["end"]) == ("2026-03-04T09:00", "2026-03-04T09:30")
        inverted = await step("update_event", event_id=made.result["data"]["id"], end="2026-03-04T08:00")
        assert "give an end after the start" in inverted.error.message
        answer = await step("ask_user", question="What time should it start?")
        assert answer.result["data"] == {"answer": f"Let's start at {TASKS[0].goal['hour']:02d}:00."}
        state = await manager.state(session)
        assert state["task_id"] == TASKS[0].id and state["questions"] == 1 and state["step_count"] == 14
    finally:
        await manager.shutdown()


def test_tools_before_reset_and_steps_after_the_end_are_refused() -> None:
    env = OfficeEnv(user=ScriptedUser())
    try:
        early = env.step(env.action_type.model_validate(call("list_todos")))
        assert early.error.error_type == "invalid_args" and "call reset()" in early.error.message
        env.reset(seed=3)
        over = env.step(env.action_type.model_validate(call("finish", summary="nothing")))
        assert over.done and over.reward == 0.0
        with pytest.raises(ValidationError, match="call reset"):
            env.step(env.action_type.model_validate(call("list_todos")))
        with pytest.raises(ValidationError, match="unknown reset option"):
            env.reset(level=2)
    finally:
        env.close()


def test_the_step_limit_ends_an_unfinished_episode_with_zero() -> None:
    env = OfficeEnv(user=ScriptedUser(), max_steps=3)
    try:
        env.reset(seed=1)
        obs = [env.step(env.action_type.model_validate(call("list_todos"))) for _ in range(3)]
        assert [o.done for o in obs] == [False, False, True] and obs[-1].metadata["truncated"] is True
    finally:
        env.close()


def test_the_scripted_user_matches_keywords_and_otherwise_does_not_know() -> None:
    task = TASKS[0]
    user = ScriptedUser()
    both = user.answer(task, "When does it start and how long is it?")
    assert f"{task.goal['hour']:02d}:00" in both and f"{task.goal['minutes']} minutes" in both
    assert user.answer(task, "What is your favourite colour?") == DONT_KNOW
    assert user.answer(task, "Whenever?") == DONT_KNOW  # whole words only: 'whenever' is not 'when'


class _StandIn(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint: echoes the system prompt's first fact, records requests."""

    seen: list[dict[str, Any]] = []
    status = 200

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "body": body})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "bad model"}}')
            return
        fact = body["messages"][0]["content"].split("may share when asked:\n- ")[1].split("\n")[0]
        reply = {"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": "stop",
                              "message": {"role": "assistant", "content": f" {fact} "}}]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[str]:
    _StandIn.seen, _StandIn.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_llm_user_talks_to_an_openai_compatible_endpoint(stand_in: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.setenv("OFFICE_USER_SIMULATOR", "llm")
    monkeypatch.setenv("OFFICE_USER_BASE_URL", stand_in)
    monkeypatch.setenv("OFFICE_USER_MODEL", "user-sim-1")
    env = OfficeEnv()
    try:
        assert isinstance(env.user, LlmUser)
        env.reset(seed=0)
        obs = env.step(env.action_type.model_validate(call("ask_user", question="What time?")))
        assert obs.result["data"] == {"answer": TASKS[0].answers[0]["answer"]}
        request = _StandIn.seen[-1]
        assert request["path"] == "/v1/chat/completions" and request["body"]["model"] == "user-sim-1"
        assert TASKS[0].request in request["body"]["messages"][0]["content"]
        assert request["body"]["messages"][1] == {"role": "user", "content": "What time?"}
        _StandIn.status = 400
        failed = env.step(env.action_type.model_validate(call("ask_user", question="What time?")))
        assert failed.error.error_type == "execution_error" and stand_in in failed.error.message
        still = env.step(env.action_type.model_validate(call("list_todos")))
        assert still.error is None
    finally:
        env.close()
    with pytest.raises(UserSimulatorError, match="failed"):
        LlmUser(base_url=stand_in, model="m").answer(TASKS[0], "x")


def test_the_simulator_choice_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFICE_USER_SIMULATOR", "oracle")
    with pytest.raises(ConfigError, match="'scripted' or 'llm'"):
        user_from_env()
    monkeypatch.setenv("OFFICE_USER_SIMULATOR", "llm")
    monkeypatch.delenv("OFFICE_USER_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OFFICE_USER_BASE_URL"):
        user_from_env()


def test_office_keeps_the_env_contract() -> None:
    actions = [{"type": "list_tools"}, call("list_contacts", query="")]
    ran = EnvContract(OfficeEnv, valid_actions=actions).run()
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action"} <= set(ran)


@pytest.mark.requires_plugins("provider-local", "transport-ws")
def test_openenv_validate_passes() -> None:
    from openenv.cli.validate_cmd import validate_target

    report = validate_target("office")
    checks = {c.name: (c.status, c.detail) for c in report.checks}
    assert report.ok, checks
    assert checks["oracle"][0] == "pass" and checks["oracle"][1].startswith("oracle 1 vs random 0")


@pytest.mark.requires_plugins("transport-mcp", "transport-ws")
def test_a_task_played_over_mcp_on_a_real_server() -> None:
    import openenv_transport_mcp.plugin
    from openenv.client import GenericEnvClient
    from openenv.server import create_app
    from openenv.testing import LiveServer
    from openenv_env_office.oracle import plan
    from openenv_transport_mcp.client import SyncMCPToolClient
    from openenv_transport_ws import plugin as ws
    from openenv_transport_ws.client import WebSocketConnector

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_mcp.plugin)
    pm.register(ws)
    pm.register(openenv_env_office.plugin)
    app = create_app("office", transports=["mcp", "ws"], plugin_manager=pm, max_sessions=2)
    task = TASKS[0]
    with LiveServer(app) as server, SyncMCPToolClient(server.url, connector=WebSocketConnector()) as env:
        env.reset(seed=0)
        assert [t.name for t in env.list_tools()] == TOOLS
        assert "Let's start at" in env.call_tool("ask_user", question="What time?")["answer"]
        contacts = env.call_tool("list_contacts", query=task.cast[0]["name"].split()[0])
        assert [c["email"] for c in contacts] == [task.cast[0]["email"]]
        for step in plan(task):
            result = env.call_tool(step["tool_name"], **step["arguments"])
        assert result == {"done": True, "reward": 1.0,
                          "checks": {"event_created": 1.0, "email_with_time": 1.0, "other_events_unchanged": 1.0}}
    # On the step path, a declared task by id; the grader's checks arrive as reward components.
    with LiveServer(app) as server, GenericEnvClient(server.url).sync() as client:
        held_out = next(t for t in TASKS if t.id == "reply_email-10")
        first = client.reset(task_id=held_out.id)
        assert first.observation["request"] == held_out.request and first.reward_components == {}
        for step in plan(held_out):
            last = client.step(step)
        assert last.done and last.reward == 1.0
        assert last.reward_components == {"office_checks": 1.0, "office_checks.reply_sent": 1.0,
                                          "office_checks.reply_names_the_date": 1.0,
                                          "office_checks.other_events_unchanged": 1.0}
