"""Where an env's action/observation/state types come from, and the start-up error without them.

First match wins: an attribute set in the class body, the generic parameters, then the annotations
of the class's own ``step`` / ``reset`` / ``state``. An env with no action type is refused when a
server is built for it (never served with a bare ``Action`` schema that refuses every action).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import RuleViolation
from openenv.server import create_app
from openenv.tools import ToolAction, ToolEnvironment
from openenv.types import Action, Observation, State


class Move(Action):
    direction: str


class Where(Observation):
    x: int = 0


class Board(State):
    cells: int = 9


class Annotated(Environment):  # type: ignore[type-arg]
    """No generic parameters: the types come from the annotations."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Where:
        return Where()

    def step(self, action: Move, timeout_s: float | None = None, **kw: Any) -> Where:
        return Where(x=1 if action.direction == "right" else -1)

    @property
    def state(self) -> Board:
        return Board()


class Untyped(Environment):  # type: ignore[type-arg]
    def reset(self, seed=None, episode_id=None, **kw):  # type: ignore[no-untyped-def]
        return Observation()

    def step(self, action, timeout_s=None, **kw):  # type: ignore[no-untyped-def]
        return Observation()

    @property
    def state(self):  # type: ignore[no-untyped-def]
        return State()


def test_annotations_give_the_types_of_an_env_without_generic_parameters() -> None:
    assert Annotated.action_type is Move
    assert Annotated.observation_type is Where
    assert Annotated.state_type is Board
    assert Annotated().action_type is Move  # read through an instance too


def test_generic_parameters_win_over_annotations_and_class_attributes_over_both() -> None:
    class Generic(Environment[Move, Observation, State]):
        def step(self, action: Action) -> Where:  # type: ignore[override]
            return Where()

    class Explicit(Annotated):
        action_type = Action  # an explicit declaration, even of the base, is a declaration

    assert (Generic.action_type, Generic.observation_type) == (Move, Observation)
    assert Explicit.action_type is Action and Explicit.observation_type is Where


def test_subclasses_inherit_the_declared_types_unless_they_annotate_their_own() -> None:
    class Other(Move):
        speed: int = 1

    class Inherits(Annotated):
        pass

    class Overrides(Annotated):
        def step(self, action: Other, timeout_s: float | None = None, **kw: Any) -> Where:
            return Where()

    assert Inherits.action_type is Move
    assert Overrides.action_type is Other and Overrides.observation_type is Where


def test_async_step_annotations_count_too() -> None:
    class AsyncEnv(Environment):  # type: ignore[type-arg]
        async def step_async(self, action: Move, timeout_s: float | None = None, **kw: Any) -> Where:
            return Where()

    assert AsyncEnv.action_type is Move and AsyncEnv.observation_type is Where


def test_a_forward_reference_is_resolved_when_the_type_is_first_read() -> None:
    source = (
        "from __future__ import annotations\n"
        "from openenv.env import Environment\n"
        "from openenv.types import Action, Observation\n"
        "class Late(Environment):\n"
        "    def step(self, action: LateAction, timeout_s=None, **kw) -> LateObs:\n"
        "        return LateObs()\n"
        "class LateAction(Action):\n"
        "    word: str\n"
        "class LateObs(Observation):\n"
        "    pass\n"
    )
    module = types.ModuleType("openenv_test_late_types")
    sys.modules[module.__name__] = module
    try:
        exec(compile(source, "<late>", "exec"), module.__dict__)
        late = module.__dict__["Late"]
        assert late.action_type is module.__dict__["LateAction"]
        assert late.observation_type is module.__dict__["LateObs"]
    finally:
        del sys.modules[module.__name__]


def test_a_pending_annotation_never_falls_back_to_the_inherited_action_type() -> None:
    source = (
        "from __future__ import annotations\n"
        "class Later(Base):\n"
        "    def step(self, action: LaterAction, timeout_s=None, **kw):\n"
        "        return None\n"
        "class Never(Base):\n"
        "    def step(self, action: UndefinedAction, timeout_s=None, **kw):\n"
        "        return None\n"
        "class LaterAction(Move):\n"
        "    pass\n"
    )
    namespace: dict[str, Any] = {"__name__": "openenv_test_pending_types", "Base": Annotated, "Move": Move}
    exec(compile(source, "<pending>", "exec"), namespace)
    assert namespace["Later"].action_type is namespace["LaterAction"]
    assert namespace["Later"].observation_type is Where  # inherited: its step names no observation
    with pytest.raises(RuleViolation, match="UndefinedAction"):
        _ = namespace["Never"].action_type


def test_without_an_action_type_reading_it_names_the_fix() -> None:
    with pytest.raises(RuleViolation) as info:
        _ = Untyped.action_type
    message = str(info.value)
    assert "Environment 'Untyped' declares no action type" in message
    assert "class Untyped(Environment[MyAction, MyObservation, State])" in message
    assert "annotate step's action parameter" in message
    # observation and state have usable defaults
    assert (Untyped.observation_type, Untyped.state_type) == (Observation, State)


def test_annotating_with_the_base_action_is_no_declaration() -> None:
    class Vague(Environment):  # type: ignore[type-arg]
        def step(self, action: Action, timeout_s: float | None = None, **kw: Any) -> Observation:
            return Observation()

    with pytest.raises(RuleViolation, match="annotated with the base class `Action`"):
        _ = Vague.action_type


def test_an_unresolvable_annotation_is_named_in_the_error() -> None:
    source = (
        "from __future__ import annotations\n"
        "from openenv.env import Environment\n"
        "class Broken(Environment):\n"
        "    def step(self, action: NowhereAction, timeout_s=None, **kw):\n"
        "        return None\n"
    )
    namespace: dict[str, Any] = {"__name__": "openenv_test_broken_types"}
    exec(compile(source, "<broken>", "exec"), namespace)
    with pytest.raises(RuleViolation) as info:
        _ = namespace["Broken"].action_type
    assert "NameError" in str(info.value) and "NowhereAction" in str(info.value)
    assert "define the types they name at module level" in str(info.value)


@pytest.mark.requires_plugins("transport-rest")
def test_building_a_server_for_an_untyped_env_fails_at_start_up() -> None:
    with pytest.raises(RuleViolation, match="declares no action type"):
        create_app(Untyped, transports=["rest"])


@pytest.mark.requires_plugins("transport-rest")
def test_a_server_for_an_untyped_env_with_an_explicit_type_is_fine() -> None:
    app = create_app(Untyped, action_type=Move, transports=["rest"])
    assert app.state.ctx.action_type is Move


@pytest.mark.requires_plugins("transport-rest")
def test_a_server_for_an_annotated_env_uses_its_types() -> None:
    app = create_app(Annotated, transports=["rest"])
    ctx = app.state.ctx
    assert (ctx.action_type, ctx.observation_type, ctx.state_type) == (Move, Where, Board)


def test_tool_envs_keep_their_dispatching_action_type() -> None:
    class Tools(ToolEnvironment):  # type: ignore[type-arg]
        pass

    assert issubclass(Tools.action_type, ToolAction)


def test_the_kernel_environment_takes_no_upstream_constructor_arguments() -> None:
    env = Annotated()
    assert not hasattr(env, "transform") and not hasattr(env, "rubric")
    with pytest.raises(TypeError):
        Annotated(transform=None)  # type: ignore[call-arg]


def test_declared_action_type_is_what_a_server_should_validate_with() -> None:
    from openenv.env import declared_action_type

    def make() -> Annotated:
        return Annotated()

    def anonymous():  # type: ignore[no-untyped-def]
        return Annotated()

    assert declared_action_type(Annotated) is Move
    assert declared_action_type(make) is Move
    assert declared_action_type(Untyped, Move) is Move  # an explicit type wins
    with pytest.raises(RuleViolation, match="declares no action type"):
        declared_action_type(Untyped)
    with pytest.raises(RuleViolation) as info:
        declared_action_type(anonymous)
    assert "does not say which env it builds" in str(info.value)
    assert "-> MyEnv:" in str(info.value) and "action_type=MyAction" in str(info.value)
