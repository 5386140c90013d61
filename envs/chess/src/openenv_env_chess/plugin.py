"""Plugin hooks of openenvkit-env-chess: registers ``chess`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["MANIFEST", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register(
        "chess", "openenv_env_chess.env:ChessEnv",
        description="Chess (UCI/SAN) against random/greedy/alpha-beta or stockfish; +1 win, 0 draw, -1 loss.",
        manifest=MANIFEST,
    )
