"""``openenv.types.Image``: a declared image field whose wire value is its data URL."""

from __future__ import annotations

import base64
import copy
import io
import pickle
import struct
from typing import Annotated

import numpy as np
import pytest
from pydantic import Field, ValidationError

from openenv import wire
from openenv.images import IMAGE_SCHEMA_KEY, Image, ImageSpec, image_fields, is_image_value
from openenv.types import Observation, observation_payload


class Shot(Observation):
    screen: Annotated[Image, ImageSpec(width=4, height=2)] | None = Field(default=None, description="the screen")
    thumb: Image | None = None
    render: Image | str | None = None


def pixels(height: int = 2, width: int = 4) -> np.ndarray:
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    rgb[-1, -1] = (0, 0, 255)
    return rgb


def pillow_png(rgb: np.ndarray, fmt: str = "PNG") -> bytes:
    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.fromarray(rgb, "RGB").save(buffer, fmt)
    return buffer.getvalue()


def test_an_array_becomes_a_png_data_url_that_decodes_to_the_same_pixels() -> None:
    obs = Shot(screen=pixels())
    assert isinstance(obs.screen, Image)
    assert obs.screen.startswith("data:image/png;base64,iVBORw0KGgo")
    assert (obs.screen.image_format, obs.screen.width, obs.screen.height) == ("png", 4, 2)
    # Our encoder's PNG is read back by another decoder (Pillow) pixel for pixel.
    assert np.array_equal(obs.screen.to_array(), pixels())
    rgba = np.dstack([pixels(), np.full((2, 4), 7, np.uint8)])
    assert np.array_equal(Image.from_array(rgba).to_array(), pixels())


def test_bytes_and_data_urls_are_kept_byte_for_byte() -> None:
    png = pillow_png(pixels())
    url = "data:image/png;base64," + base64.b64encode(png).decode()
    for given in (png, url, Image(url), bytearray(png)):
        image = Shot(thumb=given).thumb
        assert image == url and image is not None and image.data == png
    jpeg = pillow_png(pixels(16, 24), "JPEG")
    image = Image.from_bytes(jpeg)
    assert (image.image_format, image.width, image.height, image.media_type) == ("jpeg", 24, 16, "image/jpeg")
    assert image.startswith("data:image/jpeg;base64,") and image.to_array().shape == (16, 24, 3)


def test_the_wire_value_is_the_plain_data_url_string() -> None:
    obs = Shot(screen=pixels(), render="a text render")
    payload = observation_payload(obs)
    sent = wire.loads(wire.dumps(payload))
    assert sent["observation"]["screen"] == str(obs.screen)
    assert sent["observation"]["render"] == "a text render"
    assert obs.model_dump(mode="json")["screen"] == str(obs.screen)
    back = Shot.model_validate(sent["observation"])
    assert isinstance(back.screen, Image) and back.screen == obs.screen and back.render == "a text render"
    # An Image | str field keeps text as text and images as Image.
    assert type(Shot(render=str(obs.screen)).render) is Image


def test_the_schema_declares_the_image_and_its_size() -> None:
    schema = Shot.model_json_schema()
    screen = schema["properties"]["screen"]["anyOf"][0]
    assert screen["type"] == "string" and screen["pattern"] == "^data:image/(png|jpeg);base64,"
    assert screen[IMAGE_SCHEMA_KEY] == {"formats": ["png", "jpeg"], "width": 4, "height": 2}
    assert image_fields(schema) == {"screen": {"formats": ["png", "jpeg"], "width": 4, "height": 2},
                                    "thumb": {"formats": ["png", "jpeg"]}, "render": {"formats": ["png", "jpeg"]}}

    class Png(Observation):
        frame: Annotated[Image, ImageSpec(format="png")]

    frame = Png.model_json_schema()["properties"]["frame"]
    assert frame[IMAGE_SCHEMA_KEY] == {"formats": ["png"]} and frame["pattern"] == "^data:image/png;base64,"
    with pytest.raises(ValidationError, match="holds PNG images, got a JPEG"):
        Png(frame=pillow_png(pixels(), "JPEG"))


@pytest.mark.parametrize(("bad", "says"), [
    ("hello", "not an image data URL"),
    ("data:text/plain;base64,aGk=", "image data URL of type 'text/plain'"),
    ("data:image/png;base64,@@@", "base64 payload is broken"),
    ("data:image/jpeg;base64," + base64.b64encode(pillow_png(pixels())).decode(), "says image/jpeg"),
    (b"GIF89a......", "not a PNG or JPEG image"),
    (b"\x89PNG\r\n\x1a\n", "truncated PNG"),
    (np.zeros((2, 4)), "height x width x 3"),
    (np.zeros((2, 4, 3)), "dtype uint8"),
    (np.zeros((2, 5, 3), np.uint8), "holds 4x2 (width x height) images, got 5x2"),
    (12, "not int"),
])
def test_bad_input_is_a_validation_error_naming_the_field(bad: object, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Shot(screen=bad)
    (error,) = caught.value.errors()
    assert error["loc"][0] == "screen" and says in error["msg"]


def test_a_spec_around_an_optional_image_lets_none_through() -> None:
    class Maybe(Observation):
        frame: Annotated[Image | None, ImageSpec(width=4, height=2)] = None

    assert Maybe().frame is None and Maybe(frame=pixels()).frame is not None
    assert Maybe().model_dump(mode="json")["frame"] is None
    assert Maybe(frame=pixels()).model_dump(mode="json")["frame"].startswith("data:image/png;base64,")
    with pytest.raises(ValidationError, match="got 3x3"):
        Maybe(frame=pixels(3, 3))
    assert image_fields(Maybe.model_json_schema())["frame"]["width"] == 4


def test_copy_and_pickle_keep_the_facts() -> None:
    image = Image.from_array(pixels())
    for clone in (copy.deepcopy(image), pickle.loads(pickle.dumps(image))):
        assert type(clone) is Image and clone == image and (clone.width, clone.height) == (4, 2)
    assert repr(image).startswith("Image(png, 4x2,")


def test_a_jpeg_size_is_read_from_its_frame_header_after_other_segments() -> None:
    jpeg = pillow_png(pixels(5, 7), "JPEG")
    # Put a large application segment before the frame header, as cameras and editors do.
    app = b"\xff\xe1" + struct.pack(">H", 2 + 300) + b"x" * 300
    image = Image.from_bytes(jpeg[:2] + app + jpeg[2:])
    assert (image.width, image.height) == (7, 5)
    with pytest.raises(ValueError, match="JPEG without a readable frame header"):
        Image.from_bytes(jpeg[:20])


def test_is_image_value() -> None:
    assert is_image_value(str(Image.from_array(pixels())))
    assert not is_image_value("text") and not is_image_value(None) and not is_image_value(b"\x89PNG")


def test_split_and_join_images_round_trip_a_frame() -> None:
    from openenv.images import join_images, split_images

    one, two = Shot(screen=pixels(), render="text"), Shot(thumb=pillow_png(pixels(3, 3), "JPEG"))
    frame = {"type": "observations", "data": [observation_payload(one), observation_payload(two)]}
    expected = wire.loads(wire.dumps(frame))
    body = frame["data"][0]["observation"]
    blobs = split_images(frame)
    assert frame["binary"] == 2 and blobs == [one.screen.data, two.thumb.data]  # type: ignore[union-attr]
    sent = wire.loads(wire.dumps(frame))
    assert sent["data"][0]["observation"]["screen"] == {"$image": 0, "media_type": "image/png"}
    assert sent["data"][0]["observation"]["render"] == "text"  # a str in an Image | str field stays
    assert sent["data"][1]["observation"]["thumb"] == {"$image": 1, "media_type": "image/jpeg"}
    assert join_images(sent, blobs) == expected
    # A body is copied before its images are taken out: whoever else holds it sees no placeholder.
    assert isinstance(body["screen"], Image) and one.screen == body["screen"]
    with pytest.raises(ValueError, match="names binary frame 1, but 1 came"):
        join_images({"data": {"observation": {"x": {"$image": 1, "media_type": "image/png"}}}}, [b"png"])
    with pytest.raises(ValueError, match="media_type 'image/gif'"):
        join_images({"data": {"observation": {"x": {"$image": 0, "media_type": "image/gif"}}}}, [b"gif"])
    plain = {"type": "observation", "data": observation_payload(Shot(render="only text"))}
    assert split_images(plain) == [] and "binary" not in plain
