"""Image fields in Gymnasium spaces (``openenv_rollouts.spaces``), from schemas alone."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from gymnasium import spaces

from openenv.types import Image, ImageSpec, Observation
from openenv_rollouts.spaces import ImageSpace, space_for


class Frames(Observation):
    sized: Annotated[Image, ImageSpec(width=5, height=2)]
    free: Image | None = None
    either: Image | str | None = None
    outer: Annotated[Image | None, ImageSpec(width=1, height=1)] = None


def test_image_fields_map_to_pixel_spaces() -> None:
    mapped = space_for(Frames.model_json_schema(), observation=True)
    assert mapped.space["sized"] == spaces.Box(0, 255, (2, 5, 3), np.uint8)
    assert isinstance(mapped.space["free"], ImageSpace)
    assert mapped.space["outer"] == spaces.Box(0, 255, (1, 1, 3), np.uint8)
    assert not isinstance(mapped.space["either"], ImageSpace | spaces.Box)  # text or image: the raw value
    rgb = np.arange(30, dtype=np.uint8).reshape(2, 5, 3)
    wire = Frames(sized=rgb, free=rgb[:, :2]).model_dump(mode="json", exclude={"reward", "done", "metadata"})
    obs = mapped.to_agent(wire)
    assert np.array_equal(obs["sized"], rgb) and mapped.space.contains(obs)
    assert np.array_equal(obs["free"], rgb[:, :2])
    # A frame the env left out is black, so every observation fits the space.
    missing = mapped.to_agent({**wire, "free": None})
    assert missing["free"].shape == (1, 1, 3) and not missing["free"].any()
    with pytest.raises(NotImplementedError, match="declare one with ImageSpec"):
        mapped.space["free"].sample()
