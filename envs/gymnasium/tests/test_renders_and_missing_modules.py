"""Image renders (``rgb_array`` as a PNG data URL) and ids whose module is not installed."""

from __future__ import annotations

import base64
import importlib.util
import io
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from PIL import Image

from openenv.errors import ValidationError
from openenv.images import Image as Img
from openenv.images import image_fields
from openenv_env_gymnasium import GymAction, GymnasiumEnv, GymObservation

PNG_URL = "data:image/png;base64,"


class Pixels(gymnasium.Env):  # type: ignore[type-arg]
    """An image-only env: a 4 x 6 frame whose red channel is the step count."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None) -> None:
        self.action_space = spaces.Discrete(2)
        self.observation_space = spaces.Discrete(10)
        self.render_mode, self.t = render_mode, 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[int, dict]:
        super().reset(seed=seed)
        self.t = 0
        return 0, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict]:
        self.t += 1
        return self.t, 0.0, self.t >= 3, False, {}

    def render(self) -> np.ndarray:
        frame = np.zeros((4, 6, 3), dtype=np.uint8)
        frame[..., 0], frame[..., 2] = self.t * 10, 255
        return frame


gymnasium.register("openenv-test/Pixels-v0", entry_point=Pixels)


def decode(url: str) -> Image.Image:
    assert url.startswith(PNG_URL)
    raw = base64.b64decode(url[len(PNG_URL):])
    assert raw.startswith(b"\x89PNG")
    return Image.open(io.BytesIO(raw))


def test_an_rgb_array_env_renders_a_png_data_url_the_web_page_shows() -> None:
    env = GymnasiumEnv("openenv-test/Pixels-v0")
    obs = env.reset(seed=0, render=True)
    image = decode(obs.render or "")
    assert image.size == (6, 4) and image.getpixel((0, 0)) == (0, 0, 255)
    obs = env.step(GymAction(action=1))
    assert decode(obs.render or "").getpixel((5, 3)) == (10, 0, 255)
    assert env.reset(seed=0).render is None  # render=False: no image
    # The web page (plugins/web app.js imageOf) shows any observation string starting "data:image/".
    assert obs.model_dump()["render"].startswith("data:image/png;base64,iVBORw0KGgo")
    # The render is a declared image (openenv.types.Image) that decodes to the env's frame.
    assert isinstance(obs.render, Img) and (obs.render.width, obs.render.height) == (6, 4)
    assert obs.render.to_array()[3, 5].tolist() == [10, 0, 255]
    assert "render" in image_fields(GymObservation.model_json_schema())


def test_render_choices_and_refusals() -> None:
    env = GymnasiumEnv()
    text = env.reset(seed=0, env_id="FrozenLake-v1", render=True).render
    assert text and "S" in text and not text.startswith(PNG_URL)  # text preferred where the env has it
    assert type(text) is str  # a text render stays text (the field is Image | str)
    for bad in ("png", 1, [True]):
        with pytest.raises(ValidationError, match="render must be one of"):
            env.reset(env_id="FrozenLake-v1", render=bad)
    with pytest.raises(ValidationError, match=r"no 'ansi' render .* Reset with render='rgb_array'"):
        env.reset(env_id="openenv-test/Pixels-v0", render="ansi")
    assert decode(env.reset(env_id="openenv-test/Pixels-v0", render="rgb_array").render or "")


PYGAME_RENDERED = pytest.mark.parametrize(("env_id", "render"), [("CartPole-v1", True), ("FrozenLake-v1", "rgb_array")])


@PYGAME_RENDERED
def test_pygame_drawn_images(env_id: str, render: object) -> None:
    # `nox -s packages` installs this package with its classic-control extra (pygame-ce).
    pytest.importorskip("pygame", reason="the classic-control extra (pygame-ce) is not installed")
    image = decode(GymnasiumEnv().reset(seed=0, env_id=env_id, render=render).render or "")
    assert image.size[0] >= 100 and image.size[1] >= 100


@PYGAME_RENDERED
def test_without_pygame_the_refusal_names_the_extra(env_id: str, render: object,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry makes `import pygame` raise ImportError, as on a machine without the extra, so
    # this runs whether or not pygame is installed here.
    monkeypatch.setitem(sys.modules, "pygame", None)
    with pytest.raises(ValidationError, match=r"pygame.*openenvkit-env-gymnasium\[classic-control\]"):
        GymnasiumEnv().reset(seed=0, env_id=env_id, render=render)


@pytest.mark.parametrize(("env_id", "hint"), [
    ("phys2d/CartPole-v0", "the module 'jax', which is not installed: install it"),
    ("Ant-v2", "gymnasium-robotics"),
    ("GymV26Environment-v0", "shimmy"),
])
def test_ids_needing_a_missing_module_are_validation_errors_naming_it(env_id: str, hint: str) -> None:
    if env_id.startswith("phys2d/") and importlib.util.find_spec("jax") is not None:
        pytest.skip("jax is installed: phys2d ids can be made")
    for render in (False, True):
        with pytest.raises(ValidationError, match=f"{env_id} cannot be made here: .*{hint}"):
            GymnasiumEnv().reset(env_id=env_id, render=render)
