"""``openenv.core.env_server.base_transforms``: upstream's two ready-made transforms."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.interfaces import Transform

__all__ = ["CompositeTransform", "NullTransform"]


class CompositeTransform(Transform[Any]):
    """Applies ``transforms`` in order."""

    def __init__(self, transforms: list[Transform[Any]]) -> None:
        self.transforms = transforms

    def __call__(self, observation: Any) -> Any:
        for transform in self.transforms:
            observation = transform(observation)
        return observation


class NullTransform(Transform[Any]):
    """Returns the observation unchanged."""

    def __call__(self, observation: Any) -> Any:
        return observation
