"""``EchoEnvClient``: the kernel's ``EnvClient`` with the echo types (action, observation,
state) bound, so results are typed models instead of dicts."""

from __future__ import annotations

from openenv.client import EnvClient
from openenv.types import State
from openenv_env_echo.models import EchoAction, EchoObservation

__all__ = ["EchoEnvClient"]


class EchoEnvClient(EnvClient[EchoAction, EchoObservation]):
    """``async with EchoEnvClient(url) as env: await env.step(EchoAction(message="hi"))``."""

    action_type = EchoAction
    observation_type = EchoObservation
    state_type = State
