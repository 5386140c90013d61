"""``VectorEnv``: several sessions of one server driven over one client connection.

Built by ``await client.vector(n)`` (extension ``sessions``, see ``openenv.protocol``): one
``step_many`` frame carries a step for every session, for policies that act on a batch of envs.
"""

from __future__ import annotations

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

__all__ = ["VectorEnv"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")


class VectorEnv(Generic[ActT, ObsT]):
    """Several sessions of one server over one connection: a vector env for batched policies.

    Built by ``await client.vector(n)``. ``step(actions)`` takes one action per session and sends
    them in one ``step_many`` frame (several if the server's per-frame limit is lower); the
    server answers one observation per session. Steps are independent: if some fail, the first
    error is raised with ``err.results`` (a ``StepResult`` per session, ``None`` where it failed)
    and ``err.failures`` (index → error) attached, and every session stays usable.
    """

    def __init__(self, client: EnvClient[ActT, ObsT], session_ids: list[str]) -> None:
        self.client = client
        self.session_ids = session_ids

    def __len__(self) -> int:
        return len(self.session_ids)

    async def reset(self, **kwargs: Any) -> list[StepResult[ObsT]]:
        """Reset every session (same arguments for each); one result per session."""
        return [await self.reset_at(i, **kwargs) for i in range(len(self.session_ids))]

    async def reset_at(self, index: int, **kwargs: Any) -> StepResult[ObsT]:
        """Reset session ``index`` alone (e.g. after its episode ended)."""
        sid = self.session_ids[index]
        reply = await self.client._request(frame(T_RESET, kwargs, session_id=sid), primary=index == 0)
        return self.client._result(expect(reply, T_OBSERVATION))

    async def step(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """One action per session, in session order; one result per session."""
        if len(actions) != len(self.session_ids):
            raise ConfigError(f"VectorEnv.step needs one action per session: got {len(actions)} actions "
                              f"for {len(self.session_ids)} sessions.")
        client = self.client
        steps = [{"session_id": sid, "action": client._step_payload(a)}
                 for sid, a in zip(self.session_ids, actions, strict=True)]
        chunk = client._max_batch or len(steps)
        results: list[StepResult[ObsT] | None] = []
        errors: dict[int, OpenEnvError] = {}
        for start in range(0, len(steps), chunk):
            part = steps[start:start + chunk]
            reply = await client._request(frame(T_STEP_MANY, {"steps": part}))
            for offset, item in enumerate(expect_list(reply, T_OBSERVATIONS, len(part))):
                if "error" in item:
                    errors[start + offset] = error_from_wire(item["error"])
                    results.append(None)
                else:
                    results.append(client._result(item))
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
            reply = await self.client._request(frame(T_STATE, session_id=sid), primary=i == 0)
            out.append(self.client._parse_state(expect(reply, T_STATE)))
        return out

    async def close(self) -> None:
        """Close the sessions opened for this vector (session 0, the client's own, stays open)."""
        extra, self.session_ids = self.session_ids[1:], self.session_ids[:1]
        client = self.client
        if client._conn is None or client._conn.closed:
            return
        for sid in extra:
            await client._request(frame(T_CLOSE_SESSION, {"session_id": sid}), primary=False)

    async def __aenter__(self) -> VectorEnv[ActT, ObsT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
