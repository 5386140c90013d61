"""``OrsEnv`` in process, on an ORS env with what the served test's fixture lacks: a ``@terminal``
tool (the final reply), per-task tools (``list_task_tools``), ``setup``/``teardown`` and secrets.
Runs in ``nox -s ors``; skipped where openreward is not installed."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openreward.environments", reason="needs openreward (nox -s ors)")

from openenv.errors import ConfigError, ExecutionError, ValidationError
from openenv.tasks import InlineTasks
from openenv.tools import CallToolAction, ListToolsAction
from openenv_import_verifiers.ors_env import OrsEnv, OrsReply

SOURCE = '''
from __future__ import annotations

from pydantic import BaseModel

from openreward.environments import Environment, ListToolsOutput, TextBlock, ToolOutput, ToolSpec, terminal, tool

EVENTS: list[str] = []


class Reply(BaseModel):
    text: str


class Word(BaseModel):
    word: str


class CapitalEnv(Environment):
    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [{"id": "fr", "country": "France", "capital": "Paris"}]

    def setup(self):
        EVENTS.append(f"setup {self.task_spec['id']} key={self.secrets_seen}")
        if self.secrets_seen == "boom":
            raise RuntimeError("no sandbox")

    async def teardown(self):
        EVENTS.append(f"teardown {self.task_spec['id']}")

    def __init__(self, task_spec={}, secrets={}):
        super().__init__(task_spec, secrets)
        self.secrets_seen = secrets.get("KEY")

    def get_prompt(self):
        return [TextBlock(text=f"Capital of {self.task_spec['country']}?")]

    def list_task_tools(self):
        return ListToolsOutput(tools=[ToolSpec(name="spell", description="Spell a word",
                                               input_schema=Word.model_json_schema())])

    @tool(shared=False)
    def spell(self, params: Word) -> ToolOutput:
        return ToolOutput(blocks=[TextBlock(text="-".join(params.word))])

    @terminal
    @tool
    async def answer(self, params: Reply) -> ToolOutput:
        """Grade the final reply."""
        right = params.text.strip() == self.task_spec["capital"]
        return ToolOutput(blocks=[TextBlock(text="ok")], reward=1.0 if right else 0.0, finished=True)
'''


@pytest.fixture
def env_cls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[OrsEnv]]:
    (tmp_path / "capital_ors.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OPENENV_ORS_SECRETS", '{"KEY": "s3cret"}')

    class CapitalEnv(OrsEnv):
        ors_module = "capital_ors"
        ors_class = "CapitalEnv"
        other_action_type = OrsReply
        # the row shape the import writes: the ORS task spec, whole, as data
        tasks = InlineTasks([{"id": "fr", "split": "train",
                              "data": {"id": "fr", "country": "France", "capital": "Paris"}}])

    yield CapitalEnv
    sys.modules.pop("capital_ors", None)


def _events() -> list[str]:
    events: list[str] = sys.modules["capital_ors"].EVENTS
    return events


def test_the_terminal_tool_grades_the_final_reply(env_cls: type[OrsEnv]) -> None:
    env = env_cls()
    with pytest.raises(ExecutionError, match="reset"):
        env.step(CallToolAction(tool_name="spell", arguments={"word": "x"}))
    first = env.reset(seed=0)
    assert first.prompt_text == "Capital of France?" and first.final_reply
    # the terminal tool is hidden, as ORS hides it; the task's own tool (not shared) is listed
    listed = env.step(ListToolsAction())
    assert [t.name for t in listed.tools] == ["spell"]  # type: ignore[attr-defined]
    spelled: Any = env.step(CallToolAction(tool_name="spell", arguments={"word": "ab"}))
    assert spelled.result["content"] == [{"type": "text", "text": "a-b"}] and not spelled.done
    done: Any = env.step(env_cls.action_type.model_validate({"message": " Paris "}))
    assert done.done and done.reward == 1.0 and done.tool_name == "answer"
    with pytest.raises(ExecutionError, match="finished"):
        env.step(OrsReply(message="Paris"))
    again = env.reset(seed=0)
    assert [t.name for t in again.tools] == ["spell"]  # the task's tools again, once
    wrong: Any = env.step(OrsReply(message="Lyon"))
    assert wrong.done and wrong.reward == 0.0
    env.close()
    # each episode's instance was set up with the secrets and torn down
    assert _events() == ["setup fr key=s3cret", "teardown fr", "setup fr key=s3cret", "teardown fr"]


def test_the_async_path_and_close_async_tear_down_on_the_callers_loop(env_cls: type[OrsEnv]) -> None:
    async def play() -> None:
        env = env_cls()
        await env.reset_async(seed=1)
        obs: Any = await env.step_async(OrsReply(message="Paris"))
        assert obs.reward == 1.0 and env.state.done and env.state.task_id == "fr"
        await env.close_async()

    asyncio.run(play())
    assert _events() == ["setup fr key=s3cret", "teardown fr"]


def test_bad_secrets_and_reset_options_say_what_to_do(env_cls: type[OrsEnv], monkeypatch: pytest.MonkeyPatch) -> None:
    env = env_cls()
    with pytest.raises(ValidationError, match="unknown reset option"):
        env.reset(difficulty=3)
    monkeypatch.setenv("OPENENV_ORS_SECRETS", "KEY=x")
    with pytest.raises(ConfigError, match="OPENENV_ORS_SECRETS is not JSON"):
        env.reset(seed=0)
    # a setup() that raises: its words, the instance torn down, and the env still usable
    monkeypatch.setenv("OPENENV_ORS_SECRETS", '{"KEY": "boom"}')
    with pytest.raises(ExecutionError, match="could not start task 'fr': RuntimeError: no sandbox"):
        env.reset(seed=0)
    assert _events() == ["setup fr key=boom", "teardown fr"]
    monkeypatch.setenv("OPENENV_ORS_SECRETS", '{"KEY": "ok"}')
    assert env.reset(seed=0).prompt_text == "Capital of France?"
    env.close()


def test_an_env_without_a_terminal_tool_refuses_a_final_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # arith_ors.py: no @terminal tool

    class Arith(OrsEnv):
        ors_module = "arith_ors"
        ors_class = "ArithEnv"
        other_action_type = OrsReply
        tasks = InlineTasks([{"id": "t", "split": "train", "data": {"a": 1, "b": 1, "answer": "2"}}])

    env = Arith()
    assert not env.reset(seed=0).final_reply
    with pytest.raises(ValidationError, match="no @terminal tool, so a final reply grades nothing"):
        env.step(OrsReply(message="2"))
    graded: Any = env.step(CallToolAction(tool_name="submit", arguments={"answer": "2"}))
    assert graded.done and graded.reward == 1.0
    env.close()


def test_the_import_of_an_env_with_a_terminal_tool_takes_the_final_reply(tmp_path: Path,
                                                                         env_cls: type[OrsEnv]) -> None:
    from openenv_import_verifiers.ors_generate import generate_ors

    imported = generate_ors(str(tmp_path / "capital_ors.py"), tmp_path / "pkg")
    assert imported.name == "capital_ors" and imported.splits == {"train": 1}
    env_py = (tmp_path / "pkg" / "src" / "openenv_ors_capital_ors" / "env.py").read_text()
    namespace: dict[str, Any] = {"__file__": str(tmp_path / "pkg" / "src" / "openenv_ors_capital_ors" / "env.py")}
    exec(compile(env_py, "env.py", "exec"), namespace)  # the generated module, as the package loads it
    generated = namespace["CapitalOrsEnv"]
    assert generated.other_action_type is OrsReply and generated.tasks.get("fr").data["capital"] == "Paris"
    env = generated()
    env.reset(task=generated.tasks.get("fr"))
    assert env.step(generated.action_type.model_validate({"message": "Paris"})).reward == 1.0
    env.close()
    # only the class's shared tools are in the manifest: the terminal one is hidden, spell is per task
    assert "tools: []" in (tmp_path / "pkg" / "src" / "openenv_ors_capital_ors" / "openenv.yaml").read_text()


def test_a_package_folder_imports_and_travels_with_the_package(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_import_verifiers.ors_generate import generate_ors

    folder = tmp_path / "src" / "capital_pkg"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("from capital_pkg.env import CapitalEnv\n\n__all__ = ['CapitalEnv']\n")
    (folder / "env.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        imported = generate_ors(f"{folder}:CapitalEnv", tmp_path / "out", name="capital")
    finally:
        for name in ("capital_pkg", "capital_pkg.env"):
            sys.modules.pop(name, None)
    assert imported.splits == {"train": 1}
    src = tmp_path / "out" / "src"
    assert (src / "capital_pkg" / "env.py").read_text() == (folder / "env.py").read_text()
    pyproject = (tmp_path / "out" / "pyproject.toml").read_text()
    assert 'packages = ["src/openenv_ors_capital", "src/capital_pkg"]' in pyproject
    assert 'ors_module = "capital_pkg"' in (src / "openenv_ors_capital" / "env.py").read_text()
