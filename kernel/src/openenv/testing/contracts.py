"""Contract suites plugin authors run against their implementations (no pytest needed).

``ProviderContract`` checks the promises of ``openenv.interfaces.Provider`` and ``ProviderHandle``
with a real env server::

    from openenv.testing.contracts import ProviderContract

    def test_my_provider_keeps_the_contract():
        ProviderContract(MyProvider(), "echo", kill=my_kill, orphan=my_orphan).run()

Checks (each a method, so a test may run them one by one):

* ``check_lifecycle`` – ``start`` returns a ready handle with a base URL whose ``/health``
  answers 200; a real protocol round-trip works (reset, one step of ``action`` when given, state
  through ``GenericEnvClient``); ``ps()`` and ``ps(all_owners=True)`` show it; ``stop()`` stops it
  and ``ps`` no longer shows it; a second ``stop()`` is a no-op; ``gc()`` meanwhile leaves the
  live server of a live owner alone.
* ``check_stop_after_death`` (needs ``kill``: how to kill the server behind the provider's back) –
  after the server died, ``is_running()`` turns false, ``stop()`` does not raise and the handle
  disappears from ``ps``.
* ``check_gc_dead_owner`` (needs ``orphan``: starts a server from another process that then dies,
  returning the server's handle id) – ``ps(all_owners=True)`` shows the orphan, ``gc()`` reports
  it removed, and afterwards ``ps(all_owners=True)`` no longer shows it.

The contract, the env contract and the transport contract are re-exported by ``openenv.testing``.
Failures raise ``ContractError`` (an ``AssertionError``) naming the check and what was seen. Every
server a check starts is stopped before it returns, pass or fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle
from openenv.readiness import http_get
from openenv.testing.env_contract import EnvContract
from openenv.testing.errors import ContractError
from openenv.testing.errors import expect as _expect
from openenv.testing.errors import no_raise as _no_raise
from openenv.testing.transport_contract import TransportContract
from openenv.testing.waiting import wait_until

__all__ = ["ContractError", "EnvContract", "ProviderContract", "TransportContract", "default_round_trip",
           "play"]


def play(action: dict[str, Any] | None = None) -> Callable[[ProviderHandle, LaunchSpec], None]:
    """A round trip: ``reset``, then one ``step(action)`` when given, then ``state``, over the
    kernel client (any installed client transport)."""

    def round_trip(handle: ProviderHandle, spec: LaunchSpec) -> None:
        from openenv.client import GenericEnvClient

        with GenericEnvClient(handle.base_url, token=spec.token).sync() as client:
            result = client.reset()
            if not isinstance(result.observation, dict):
                raise ContractError(f"reset() returned no observation object: {result!r}")
            expected = 0
            if action is not None:
                stepped = client.step(action)
                if not isinstance(stepped.observation, dict):
                    raise ContractError(f"step({action!r}) returned no observation object: {stepped!r}")
                expected = 1
            state = client.state()
            if not isinstance(state, dict) or state.get("step_count") != expected:
                raise ContractError(f"state() should have step_count {expected}, got {state!r}")

    return round_trip


#: ``reset`` then ``state`` (no step: it needs an action of the env).
default_round_trip = play()


@dataclass
class ProviderContract:
    """The provider contract, bound to one provider instance and one env it can start."""

    provider: Provider
    env: str
    #: Template for every start (its ``env`` is replaced by ``self.env``).
    spec: LaunchSpec | None = None
    #: Kills the server abruptly, behind the provider's back (enables ``check_stop_after_death``).
    kill: Callable[[ProviderHandle], None] | None = None
    #: Starts a server owned by a process that is then killed; returns the handle id
    #: (enables ``check_gc_dead_owner``).
    orphan: Callable[[], str] | None = None
    round_trip: Callable[[ProviderHandle, LaunchSpec], None] = default_round_trip
    stop_timeout_s: float = 10.0
    #: How long a dead server may take to be noticed by ``is_running``.
    death_timeout_s: float = 10.0
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    # -- runner -----------------------------------------------------------------------------------

    def run(self) -> list[str]:
        """Run every check that applies; returns the names of those that ran."""
        self._check("check_lifecycle", self.check_lifecycle)
        if self.kill is not None:
            self._check("check_stop_after_death", self.check_stop_after_death)
        else:
            self.skipped.append("check_stop_after_death")
        if self.orphan is not None:
            self._check("check_gc_dead_owner", self.check_gc_dead_owner)
        else:
            self.skipped.append("check_gc_dead_owner")
        return list(self.ran)

    def _check(self, name: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except ContractError as exc:
            raise ContractError(f"[{self._label}] {name}: {exc}") from exc
        self.ran.append(name)

    @property
    def _label(self) -> str:
        return f"provider {getattr(self.provider, 'name', '') or type(self.provider).__name__}"

    def _spec(self) -> LaunchSpec:
        return replace(self.spec, env=self.env) if self.spec is not None else LaunchSpec(env=self.env)

    # -- checks -----------------------------------------------------------------------------------

    def check_lifecycle(self) -> None:
        spec = self._spec()
        handle = self.provider.start(spec)
        try:
            _expect(bool(getattr(handle, "base_url", "")), f"start() returned a handle without a "
                    f"base_url: {handle!r}")
            _expect(handle.is_running(), "is_running() is False right after start()")
            status = _no_raise(lambda: http_get(handle.base_url, "/health", timeout_s=5.0)[0],
                               f"GET {handle.base_url}/health failed right after start()")
            _expect(status == 200, f"GET {handle.base_url}/health answered {status} right after start()")
            self.round_trip(handle, spec)
            mine = self.provider.ps()
            _expect(handle.id in _ids(mine), f"ps() does not show the started handle {handle.id!r}: {mine}")
            _expect(handle.id in _ids(self.provider.ps(all_owners=True)),
                    f"ps(all_owners=True) does not show the started handle {handle.id!r}")
            collected = _ids(_no_raise(self.provider.gc, "gc() raised with a live server running"))
            _expect(handle.id not in collected and handle.is_running(),
                    f"gc() collected the live server {handle.id!r} of a running owner")
        finally:
            handle.stop(self.stop_timeout_s)
        _expect(not handle.is_running(), "is_running() is still True after stop()")
        _expect(handle.id not in _ids(self.provider.ps(all_owners=True)),
                f"ps(all_owners=True) still shows {handle.id!r} after stop()")
        _no_raise(lambda: handle.stop(self.stop_timeout_s), "a second stop() raised")

    def check_stop_after_death(self) -> None:
        assert self.kill is not None
        handle = self.provider.start(self._spec())
        try:
            self.kill(handle)
            wait_until(lambda: not handle.is_running(), timeout_s=self.death_timeout_s, interval_s=0.05)
            _expect(not handle.is_running(),
                    f"is_running() still True {self.death_timeout_s:g}s after the server was killed")
        finally:
            _no_raise(lambda: handle.stop(self.stop_timeout_s), "stop() after the server died raised")
        _expect(handle.id not in _ids(self.provider.ps(all_owners=True)),
                f"ps(all_owners=True) still shows the dead server {handle.id!r} after stop()")
        _no_raise(lambda: handle.stop(self.stop_timeout_s), "a second stop() after death raised")

    def check_gc_dead_owner(self) -> None:
        assert self.orphan is not None
        orphan_id = self.orphan()
        before = _ids(self.provider.ps(all_owners=True))
        _expect(orphan_id in before,
                f"ps(all_owners=True) does not show the orphan {orphan_id!r} (saw {before})")
        mine = _ids(self.provider.ps())
        _expect(orphan_id not in mine, f"ps() (this owner only) shows another owner's {orphan_id!r}")
        removed = _ids(self.provider.gc())
        _expect(orphan_id in removed, f"gc() did not report the orphan {orphan_id!r} (removed {removed})")
        after = _ids(self.provider.ps(all_owners=True))
        _expect(orphan_id not in after, f"the orphan {orphan_id!r} is still listed after gc()")


def _ids(infos: list[HandleInfo]) -> list[str]:
    return [info.id for info in infos]
