"""Loading an entry checks its kind: a wrong registration fails at load, naming what to do."""

from __future__ import annotations

import sys

import pytest

from openenv.kinds import KindError
from openenv.registry import EnvRegistry, Registry, TransportRegistry

OBJECTS = """
from openenv.env import Environment
from openenv.interfaces import ClientConnector, Provider, ServerTransport
from openenv.types import Action, Observation, State


class EchoLikeAction(Action):
    message: str = ""


class MyEnv(Environment[EchoLikeAction, Observation, State]):
    def reset(self, seed=None, episode_id=None, **kw):
        return Observation()

    def step(self, action, timeout_s=None, **kw):
        return Observation()

    @property
    def state(self):
        return State()


ENV_INSTANCE = MyEnv()


def make_env():
    return MyEnv()


def make_sized_env(size, *, walls):
    return MyEnv()


def make_env_with_defaults(size=5, *args, **kwargs):
    return MyEnv()


NOT_CALLABLE = 42


class GoodProvider(Provider):
    def start(self, spec):
        raise NotImplementedError

    def ps(self, *, all_owners=False):
        return []

    def gc(self):
        return []


class OldProvider(Provider):
    # Written against the old contract: `list` instead of `ps`.
    def start(self, spec):
        raise NotImplementedError

    def list(self, *, all_owners=False):
        return []

    def gc(self):
        return []


PROVIDER_INSTANCE = GoodProvider()


class GoodTransport(ServerTransport):
    name = "good"

    def routes(self):
        return []


class Connector(ClientConnector):
    schemes = ("good", "goods")

    async def connect(self, base_url, options):
        raise NotImplementedError


class NoSchemes(ClientConnector):
    async def connect(self, base_url, options):
        raise NotImplementedError


def command():
    pass


class NotACommand:
    pass
"""


@pytest.fixture
def objs(tmp_module) -> str:  # type: ignore[no-untyped-def]
    return tmp_module("kindcheck_objs", OBJECTS)


def _env(objs: str, attr: str) -> object:
    registry = EnvRegistry()
    registry.current_plugin = "author"
    registry.register("it", f"{objs}:{attr}")
    return registry.load("it")


@pytest.mark.parametrize("attr", ["MyEnv", "make_env", "make_env_with_defaults"])
def test_env_classes_and_zero_argument_factories_load(objs: str, attr: str) -> None:
    assert _env(objs, attr) is getattr(sys.modules[objs], attr)


@pytest.mark.parametrize(("attr", "found", "fix"), [
    ("EchoLikeAction", "the class kindcheck_objs.EchoLikeAction (a subclass of Action",
     "That is an Action model, not the env: register the Environment subclass whose step/reset "
     "use it."),
    ("ENV_INSTANCE", "an instance of kindcheck_objs.MyEnv",
     "Register the class itself (each session gets its own instance)"),
    ("make_sized_env", "the function kindcheck_objs.make_sized_env",
     "The factory needs the argument(s) size, walls, but it is called with none"),
    ("NOT_CALLABLE", "an instance of builtins.int", "Point the reference at the Environment subclass."),
])
def test_wrong_env_registrations_fail_at_load_with_the_fix(
    objs: str, attr: str, found: str, fix: str
) -> None:
    with pytest.raises(KindError) as excinfo:
        _env(objs, attr)
    message = str(excinfo.value)
    assert message.startswith(f"env 'it' (from plugin 'author') is registered as {objs}:{attr}, "
                              f"which is {found}")
    assert "expected an openenv.Environment subclass or a zero-argument factory function" in message
    assert fix in message


def test_a_failed_kind_check_is_not_cached(objs: str) -> None:
    registry = EnvRegistry()
    registry.register("it", f"{objs}:EchoLikeAction")
    for _ in range(2):
        with pytest.raises(KindError):
            registry.load("it")


@pytest.mark.parametrize(("attr", "fix"), [
    ("PROVIDER_INSTANCE", "Register the class itself, not an instance of it"),
    ("MyEnv", "Subclass openenv.interfaces.Provider and register that class"),
    ("OldProvider", "does not implement ps. Implement every abstract method"),
])
def test_wrong_provider_registrations_fail_at_load(objs: str, attr: str, fix: str) -> None:
    registry = Registry("provider")
    registry.register("p", f"{objs}:{attr}")
    with pytest.raises(KindError, match="provider 'p'") as excinfo:
        registry.load("p")
    assert fix in str(excinfo.value)


def test_a_provider_subclass_loads(objs: str) -> None:
    registry = Registry("provider")
    registry.register("p", f"{objs}:GoodProvider")
    assert registry.load("p").__name__ == "GoodProvider"


def test_transport_schemes_come_from_the_connector_once(objs: str) -> None:
    registry = TransportRegistry()
    entry = registry.register("good", server=f"{objs}:GoodTransport", client=f"{objs}:Connector")
    assert objs not in sys.modules  # registering and listing stay lazy
    assert "client" in entry.to_json() and "schemes" not in entry.to_json()
    assert objs not in sys.modules
    assert entry.schemes == ("good", "goods")
    # Callers of the untyped API read the same single source.
    assert "goods" in entry.extra["schemes"] and list(entry.extra["schemes"]) == ["good", "goods"]
    assert entry.load().__name__ == "GoodTransport"
    assert registry.register("server_only", server=f"{objs}:GoodTransport").schemes == ()


@pytest.mark.parametrize(("server", "client", "fix"), [
    ("MyEnv", None, "Subclass openenv.interfaces.ServerTransport"),
    ("GoodTransport", "NoSchemes", "declare the URL schemes it connects to"),
    ("GoodTransport", "GoodTransport", "Subclass openenv.interfaces.ClientConnector"),
])
def test_wrong_transport_parts_fail_at_load(objs: str, server: str, client: str | None, fix: str) -> None:
    registry = TransportRegistry()
    entry = registry.register("t", server=f"{objs}:{server}",
                              client=f"{objs}:{client}" if client else None)
    with pytest.raises(KindError, match="transport 't'") as excinfo:
        entry.load()
        entry.load_client()
    assert fix in str(excinfo.value)


def test_commands_are_typer_apps_or_functions(objs: str) -> None:
    registry = Registry("command")
    registry.register("ok", f"{objs}:command")
    registry.register("bad", f"{objs}:NotACommand")
    assert callable(registry.load("ok"))
    with pytest.raises(KindError, match=r"expected a typer\.Typer app or a function"):
        registry.load("bad")
