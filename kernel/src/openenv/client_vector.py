"""``VectorEnv``: several sessions of one server driven over one client connection.

Built by ``await client.vector(n)`` (extension ``sessions``, see ``openenv.protocol``): one
``step_many`` frame carries a step for every session, for policies that act on a batch of envs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from openenv.errors import ConfigError, OpenEnvError, error_from_wire
from openenv.protocol import (
    T_CLOSE_SESSION,
    T_OBSERVATION,
    T_OBSERVATIONS,
    T_RESET,
    T_STATE,
    T_STEP_MANY,
    expect,
    expect_list,
    frame,
)
from openenv.types import StepResult

if TYPE_CHECKING:
    from openenv.client import EnvClient

__all__ = ["VectorEnv", "VectorLink"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")


@dataclass(frozen=True, slots=True)
class VectorLink(Generic[ObsT]):
    """What a ``VectorEnv`` uses of its client, handed over by ``EnvClient.vector`` (the vector
    never reaches into the client's own state)."""

    #: Send a frame on the client's connection and return the reply (``primary``: a fatal error
    #: there is about the client's own session).
    request: Callable[..., Awaitable[dict[str, Any]]]
    #: An observation payload -> the client's typed ``StepResult``.
    result: Callable[[dict[str, Any]], StepResult[ObsT]]
    #: An action (typed or a dict) -> its wire object.
    step_payload: Callable[[Any], dict[str, Any]]
    #: A ``state`` payload -> the client's state type.
    parse_state: Callable[[dict[str, Any]], Any]
    #: The server's most steps per frame (None: no limit known).
    max_batch: Callable[[], int | None]


class VectorEnv(Generic[ActT, ObsT]):
    """Several sessions of one server over one connection: a vector env for batched policies.

    Built by ``await client.vector(n)``. ``step(actions)`` takes one action per session and sends
    them in one ``step_many`` frame (several if the server's per-frame limit is lower); the
    server answers one observation per session. Steps are independent: if some fail, the first
    error is raised with ``err.results`` (a ``StepResult`` per session, ``None`` where it failed)
    and ``err.failures`` (index → error) attached, and every session stays usable.
    """

    def __init__(self, client: EnvClient[ActT, ObsT], session_ids: list[str], link: VectorLink[ObsT]) -> None:
        self.client = client
        self.session_ids = session_ids
        self._link = link

    def __len__(self) -> int:
        return len(self.session_ids)

    async def reset(self, **kwargs: Any) -> list[StepResult[ObsT]]:
        """Reset every session (same arguments for each); one result per session."""
        return [await self.reset_at(i, **kwargs) for i in range(len(self.session_ids))]

    async def reset_at(self, index: int, **kwargs: Any) -> StepResult[ObsT]:
        """Reset session ``index`` alone (e.g. after its episode ended)."""
        sid = self.session_ids[index]
        reply = await self._link.request(frame(T_RESET, kwargs, session_id=sid), primary=index == 0)
        return self._link.result(expect(reply, T_OBSERVATION))

    async def step(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """One action per session, in session order; one result per session."""
        if len(actions) != len(self.session_ids):
            raise ConfigError(f"VectorEnv.step needs one action per session: got {len(actions)} actions "
                              f"for {len(self.session_ids)} sessions (step_some(indices, actions) steps a few).")
        return await self.step_some(list(range(len(self.session_ids))), actions)

    async def step_some(self, indices: list[int], actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """One action for each session in ``indices`` (the others wait: e.g. one whose episode ended
        and that is reset instead); one result per index, in their order. Errors as ``step``, with
        ``err.results``/``err.failures`` positioned like ``indices``."""
        if len(actions) != len(indices):
            raise ConfigError(f"VectorEnv.step_some needs one action per index: got {len(actions)} actions "
                              f"for {len(indices)} indices.")
        if len(set(indices)) != len(indices) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(self.session_ids) for i in indices):
            raise ConfigError(f"VectorEnv.step_some needs distinct session indices in 0..{len(self.session_ids) - 1}, "
                              f"got {indices!r}.")
        link = self._link
        steps = [{"session_id": self.session_ids[i], "action": link.step_payload(a)}
                 for i, a in zip(indices, actions, strict=True)]
        chunk = link.max_batch() or len(steps)
        results: list[StepResult[ObsT] | None] = []
        errors: dict[int, OpenEnvError] = {}
        for start in range(0, len(steps), chunk):
            part = steps[start:start + chunk]
            reply = await link.request(frame(T_STEP_MANY, {"steps": part}))
            for offset, item in enumerate(expect_list(reply, T_OBSERVATIONS, len(part))):
                if "error" in item:
                    errors[start + offset] = error_from_wire(item["error"])
                    results.append(None)
                else:
                    results.append(link.result(item))
        if errors:
            first = errors[min(errors)]
            first.results = results  # type: ignore[attr-defined]
            first.failures = errors  # type: ignore[attr-defined]
            raise first
        return results  # type: ignore[return-value]

    async def state(self) -> list[Any]:
        """Every session's state, in session order."""
        out = []
        for i, sid in enumerate(self.session_ids):
            reply = await self._link.request(frame(T_STATE, session_id=sid), primary=i == 0)
            out.append(self._link.parse_state(expect(reply, T_STATE)))
        return out

    async def close(self) -> None:
        """Close the sessions opened for this vector (session 0, the client's own, stays open)."""
        extra, self.session_ids = self.session_ids[1:], self.session_ids[:1]
        if not self.client.connected:  # the connection's end closed them already
            return
        for sid in extra:
            await self._link.request(frame(T_CLOSE_SESSION, {"session_id": sid}), primary=False)

    async def __aenter__(self) -> VectorEnv[ActT, ObsT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
