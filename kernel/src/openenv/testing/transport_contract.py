"""``TransportContract``: what every transport plugin promises, checked over a real server.

::

    from openenv.testing import TransportContract

    def test_my_transport_keeps_the_contract(plugin_manager) -> None:
        plugin_manager.register(my_transport_plugin)
        TransportContract("mine", plugin_manager=plugin_manager).run()

The transport is served alone (``transports=[name]``) with ``openenv.testing.EchoEnv`` by a
uvicorn server on 127.0.0.1. Checks:

* ``check_served`` – the app builds with the transport, ``/health`` answers 200 and
  ``/capabilities`` lists the transport.
* ``check_round_trip`` – ``reset`` / ``step`` / ``state`` through the kernel client over the
  transport's own connector: the echo comes back, the reward is right, ``step_count`` counts.
* ``check_bad_request`` – an invalid action is refused with ``ValidationError`` and an unknown
  frame type with a structured error frame (``code`` and ``message``); the same session then
  still answers, and a new client can still connect.
* ``check_capacity`` – with ``max_sessions=1`` a second session is refused with
  ``CapacityError`` (saying ``max_sessions``); once the first closes, a new one gets the slot.

The last three need a client connector: a server-only transport (``client=None``) skips them
unless ``round_trip=`` is given, a callable ``(base_url) -> None`` that drives the server in the
transport's own protocol and raises on failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv.client import GenericEnvClient
from openenv.errors import CapacityError, OpenEnvError, ValidationError
from openenv.interfaces import ConnectOptions
from openenv.protocol import T_ERROR, T_RESET, T_STATE, frame
from openenv.readiness import http_get
from openenv.testing._served import connector_for
from openenv.testing.envs import EchoEnv
from openenv.testing.errors import ContractError, expect
from openenv.testing.live import LiveServer, live_server

if TYPE_CHECKING:
    from openenv.plugins import PluginManager

__all__ = ["TransportContract"]


@dataclass
class TransportContract:
    """The transport contract, bound to one transport name in one plugin manager."""

    transport: str
    #: Where the transport is registered (default: the process-wide manager, i.e. installed).
    plugin_manager: PluginManager | None = None
    #: For a server-only transport: drives a served ``EchoEnv`` at ``base_url``, raising on failure.
    round_trip: Callable[[str], None] | None = None
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def _pm(self) -> PluginManager:
        from openenv.plugins import get_plugin_manager

        return self.plugin_manager or get_plugin_manager()

    @property
    def has_client(self) -> bool:
        return bool(self._pm().catalog.transports.get(self.transport).extra.get("client"))

    def run(self) -> list[str]:
        """Run every check that applies; returns the names of those that ran."""
        checks: list[tuple[str, Callable[[], None], bool]] = [
            ("check_served", self.check_served, True),
            ("check_round_trip", self.check_round_trip, self.has_client or self.round_trip is not None),
            ("check_bad_request", self.check_bad_request, self.has_client),
            ("check_capacity", self.check_capacity, self.has_client),
        ]
        for name, fn, applies in checks:
            if not applies:
                self.skipped.append(name)
                continue
            try:
                fn()
            except ContractError as exc:
                raise ContractError(f"[transport {self.transport}] {name}: {exc}") from exc
            except Exception as exc:
                raise ContractError(f"[transport {self.transport}] {name}: raised "
                                    f"{type(exc).__name__}: {exc}") from exc
            self.ran.append(name)
        return list(self.ran)

    def _serve(self, **settings: Any) -> Any:
        settings.setdefault("max_sessions", 2)
        return live_server(EchoEnv, transports=[self.transport], plugin_manager=self._pm(), **settings)

    def _client(self, server: LiveServer) -> GenericEnvClient:
        return GenericEnvClient(server.url, connector=connector_for(self._pm(), self.transport),
                                connect_timeout_s=10, message_timeout_s=10)

    # -- checks -----------------------------------------------------------------------------------

    def check_served(self) -> None:
        with self._serve() as server:
            status, _ = http_get(server.url, "/health")
            expect(status == 200, f"GET /health answered {status}")
            status, body = http_get(server.url, "/capabilities")
            expect(status == 200, f"GET /capabilities answered {status}")
            import json

            listed = json.loads(body).get("transports", [])
            expect(self.transport in listed, f"/capabilities lists transports {listed}, not {self.transport!r}")

    def check_round_trip(self) -> None:
        with self._serve() as server:
            if not self.has_client:
                assert self.round_trip is not None
                self.round_trip(server.url)
                return
            asyncio.run(self._round_trip(server))

    async def _round_trip(self, server: LiveServer) -> None:
        async with self._client(server) as client:
            first = await client.reset(seed=7)
            expect(first.observation.get("echoed_message") == "ready",
                   f"reset() gave {first.observation!r}, not the echo env's first observation")
            result = await client.step({"message": "hello"})
            expect(result.observation.get("echoed_message") == "hello",
                   f"step() echoed {result.observation!r}")
            expect(result.reward is not None and abs(result.reward - 0.5) < 1e-9,
                   f"step() reward {result.reward!r}, expected 0.5")
            state = await client.state()
            expect(isinstance(state, dict) and state.get("step_count") == 1,
                   f"state() after one step gave {state!r}, expected step_count 1")

    def check_bad_request(self) -> None:
        with self._serve() as server:
            asyncio.run(self._bad_request(server))

    async def _bad_request(self, server: LiveServer) -> None:
        async with self._client(server) as client:
            await client.reset()
            try:
                await client.step({"message": ""})
            except ValidationError as exc:
                expect(bool(exc.errors), f"the ValidationError lists no errors: {exc!r}")
            else:
                raise ContractError("an invalid action (empty message) was accepted")
            state = await client.state()
            expect(state.get("step_count") == 0, f"the session did not survive a refused action: {state!r}")
        connection = await connector_for(self._pm(), self.transport).connect(server.url, ConnectOptions())
        try:
            await connection.request(frame(T_RESET, {}))
            reply = await connection.request(frame("no_such_frame_type", {}))
            data = reply.get("data") if isinstance(reply, dict) else None
            expect(reply.get("type") == T_ERROR and isinstance(data, dict) and bool(data.get("code"))
                   and bool(data.get("message")),
                   f"an unknown frame type got {reply!r}, not an error frame with code and message")
            again = await connection.request(frame(T_STATE))
            expect(again.get("type") == T_STATE, f"the connection did not survive a bad frame: {again!r}")
        finally:
            await connection.close()
        async with self._client(server) as other:
            await other.reset()

    def check_capacity(self) -> None:
        with self._serve(max_sessions=1) as server:
            asyncio.run(self._capacity(server))

    async def _capacity(self, server: LiveServer) -> None:
        first = self._client(server)
        await first.reset()
        second = self._client(server)
        try:
            try:
                await second.reset()
            except CapacityError as exc:
                expect(exc.max_sessions == 1, f"the CapacityError says max_sessions={exc.max_sessions!r}")
            else:
                raise ContractError("a second session was opened on a server with max_sessions=1")
            await first.close()
            for _ in range(200):  # the slot is freed once the server has seen the close (bounded)
                try:
                    await second.reset()
                    break
                except CapacityError:
                    await asyncio.sleep(0.02)
            else:
                raise ContractError("the slot of a closed session was not freed within 4s")
        except OpenEnvError as exc:
            raise ContractError(f"unexpected {type(exc).__name__}: {exc}") from exc
        finally:
            await first.close()
            await second.close()
