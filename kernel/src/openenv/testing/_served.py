"""The parts of the contracts that need a real server and a real client (see ``env_contract``).

Private to the kit: what third parties use is ``EnvContract(...).run()`` / ``TransportContract``,
which call into this module.

``client_transports(pm)`` lists the transports of a plugin manager that have a client connector
(``ws`` first); ``connector_for(pm, name)`` builds one. The env contract's ``check_served`` runs
through the first of them.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from openenv.client import GenericEnvClient
from openenv.env import env_traits
from openenv.errors import ValidationError
from openenv.interfaces import ClientConnector
from openenv.registry import load_ref
from openenv.testing.errors import ContractError, expect
from openenv.testing.live import live_server
from openenv.testing.waiting import wait_until

if TYPE_CHECKING:
    from openenv.plugins import PluginManager
    from openenv.testing.env_contract import EnvContract

__all__ = ["client_transports", "connector_for", "served_env_checks"]


def _manager(pm: PluginManager | None) -> PluginManager:
    from openenv.plugins import get_plugin_manager

    return pm or get_plugin_manager()


def client_transports(pm: PluginManager | None = None) -> list[str]:
    """Names of the transports in ``pm`` (default: installed) that have a client connector."""
    names = [e.name for e in _manager(pm).catalog.transports if e.extra.get("client")]
    return sorted(names, key=lambda n: (n != "ws", n))


def connector_for(pm: PluginManager | None, name: str) -> ClientConnector:
    """A fresh client connector of transport ``name``; ``ContractError`` if it has none."""
    entry = _manager(pm).catalog.transports.get(name)
    ref = entry.extra.get("client")
    if not ref:
        raise ContractError(f"transport {name!r} registers no client connector")
    connector = load_ref(ref)()
    expect(isinstance(connector, ClientConnector),
           f"the client of transport {name!r} ({ref}) is not a ClientConnector: {connector!r}")
    return connector  # type: ignore[no-any-return]


def _recording_factory(env: Any, closed: list[int], lock: threading.Lock) -> Any:
    """A factory building ``env``'s instances whose ``close`` records that it ran."""
    traits = env_traits(env)

    def factory() -> Any:
        instance = env()
        original = instance.close

        def close() -> None:
            with lock:
                closed.append(id(instance))
            original()

        instance.close = close
        return instance

    factory.__name__ = getattr(env, "__name__", "env")
    factory.__qualname__ = factory.__name__
    from openenv.env import env_class_of

    cls = env_class_of(env)
    factory.__annotations__ = {"return": cls} if cls is not None else {}
    for trait, value in traits.items():
        setattr(factory, trait, value)
    return factory


def served_env_checks(contract: EnvContract) -> None:
    """``EnvContract.check_served``: the env behind a live server, driven by the kernel client."""
    pm = contract.plugin_manager
    names = client_transports(pm)
    if not names:
        contract.skipped.append("check_served")
        return
    transport = names[0]
    closed: list[int] = []
    lock = threading.Lock()
    factory = _recording_factory(contract.env, closed, lock)
    sessions = 2 if contract.concurrent else 1
    with live_server(factory, transports=[transport], plugin_manager=pm, max_sessions=sessions,
                     env_name=contract.name) as server:
        asyncio.run(_drive(contract, server.url, _connector(pm, transport)))
        if contract.concurrent:
            asyncio.run(_two_sessions(contract, server.url, pm, transport))
        expect(bool(wait_until(lambda: len(closed) >= (3 if contract.concurrent else 1), timeout_s=10)),
               f"the server did not call close() on the env after its sessions ended "
               f"({len(closed)} closes seen, over transport {transport!r})")


def _connector(pm: PluginManager | None, name: str) -> ClientConnector:
    return connector_for(pm, name)


async def _drive(contract: EnvContract, url: str, connector: ClientConnector) -> None:
    action = contract.actions()[0]
    payload = action if isinstance(action, dict) else action.model_dump()
    async with GenericEnvClient(url, connector=connector) as client:
        first = await client.reset(seed=contract.seed)
        expect(isinstance(first.observation, dict), f"reset over the server gave {first!r}")
        await client.step(payload)
        bad = contract._invalid()
        try:
            await client.step(bad)
        except ValidationError as exc:
            expect(bool(exc.errors) or bool(str(exc)), "the validation error carries no detail")
        else:
            raise ContractError(f"the server accepted the invalid action {bad!r}")
        state = await client.state()
        expect(isinstance(state, dict) and "step_count" in state,
               f"the session did not survive an invalid action: state() gave {state!r}")


async def _two_sessions(contract: EnvContract, url: str, pm: PluginManager | None, name: str) -> None:
    action = contract.actions()[0]
    payload = action if isinstance(action, dict) else action.model_dump()
    async with GenericEnvClient(url, connector=_connector(pm, name)) as a, \
            GenericEnvClient(url, connector=_connector(pm, name)) as b:
        await a.reset(seed=contract.seed)
        await b.reset(seed=contract.seed)
        before = await b.state()
        await a.step(payload)
        after = await b.state()
        expect(before == after, f"a step in one session changed another session's state: "
                                f"{before!r} -> {after!r}")
