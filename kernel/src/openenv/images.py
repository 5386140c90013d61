"""Images as declared observation fields: ``screenshot: Image | None``.

An ``Image`` *is* its data URL (``data:image/png;base64,...``, a ``str`` subclass), so on the JSON
wire it is the same string envs sent before there was a type for it, and every client that reads
strings (upstream's included) keeps working. What the type adds:

* **a declaration in the JSON Schema** that consumers read instead of sniffing strings::

      {"type": "string", "pattern": "^data:image/(png|jpeg);base64,",
       "x-openenv-image": {"formats": ["png", "jpeg"], "width": 160, "height": 210}}

  (``width``/``height`` only when the field declares them with ``ImageSpec``). We do not use
  ``contentEncoding: base64``: the value is a data URL, not a bare base64 string, and a validator
  that honours ``contentEncoding`` would refuse it;
* **checked input**: PNG or JPEG bytes, a data URL, another ``Image``, or a numpy ``uint8`` array of
  shape height x width x 3 (RGB) or x 4 (RGBA), encoded to PNG here with zlib (no Pillow needed).
  Anything else — text that is not an image, broken base64, bytes of another format, an array of
  another shape or dtype, a size other than the declared one — is a ``ValueError``, which pydantic
  reports as a ``ValidationError`` at the field's location;
* **the facts**: ``image_format``, ``media_type``, ``width``, ``height``, ``data`` (the encoded
  bytes) and ``to_array()`` (decoded pixels, with Pillow).
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import core_schema

if TYPE_CHECKING:
    import numpy as np
    from pydantic.json_schema import JsonSchemaValue

__all__ = ["BINARY_PLACEHOLDER", "IMAGE_SCHEMA_KEY", "Image", "ImageFormat", "ImageSpec", "image_fields",
           "is_image_value", "join_images", "split_images"]

ImageFormat = Literal["png", "jpeg"]
#: The JSON Schema key that marks a string property as an image (see the module docstring).
IMAGE_SCHEMA_KEY = "x-openenv-image"
_FORMATS: tuple[ImageFormat, ...] = ("png", "jpeg")
_PREFIX = {"png": "data:image/png;base64,", "jpeg": "data:image/jpeg;base64,"}
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_JPEG_MAGIC = b"\xff\xd8\xff"
#: JPEG start-of-frame markers (baseline, progressive, lossless...), which carry the size;
#: 0xC4/0xC8/0xCC share the range but are tables, not frames.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _sniff(data: bytes) -> tuple[ImageFormat, int, int]:
    """Format, width and height of encoded image bytes; ``ValueError`` when they are no PNG/JPEG."""
    if data.startswith(_PNG_MAGIC):
        if len(data) < 33 or data[12:16] != b"IHDR":
            raise ValueError("a truncated PNG (no IHDR header after the signature)")
        width, height = struct.unpack(">II", data[16:24])
        if not width or not height:
            raise ValueError(f"a PNG of size {width}x{height}")
        return "png", width, height
    if data.startswith(_JPEG_MAGIC):
        at = 2
        while at + 9 <= len(data):
            if data[at] != 0xFF:
                break
            marker = data[at + 1]
            if marker == 0xFF:  # fill byte before a marker
                at += 1
                continue
            (length,) = struct.unpack(">H", data[at + 2:at + 4])
            if marker in _JPEG_SOF:
                height, width = struct.unpack(">HH", data[at + 5:at + 9])
                if not width or not height:
                    raise ValueError(f"a JPEG of size {width}x{height}")
                return "jpeg", width, height
            at += 2 + length
        raise ValueError("a JPEG without a readable frame header (truncated or corrupt)")
    head = data[:8]
    raise ValueError(f"not a PNG or JPEG image (first bytes {head!r}); give PNG/JPEG bytes, a "
                     "data:image/png;base64,... URL, or an HxWx3 uint8 array")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _encode_png(array: Any) -> bytes:
    """An ``HxWx3`` (RGB) or ``HxWx4`` (RGBA) uint8 array as PNG bytes (filter 0 on every row)."""
    import numpy as np

    pixels = np.asarray(array)
    if pixels.ndim != 3 or pixels.shape[2] not in (3, 4) or not pixels.shape[0] or not pixels.shape[1]:
        raise ValueError(f"an image array is height x width x 3 (RGB) or x 4 (RGBA), got shape {pixels.shape}")
    if pixels.dtype != np.uint8:
        # Casting would wrap 256 to 0 and cut floats in [0, 1] to black: say so instead.
        raise ValueError(f"an image array has dtype uint8 (0..255), got {pixels.dtype}; convert it with "
                         "array.astype(np.uint8) after scaling to 0..255")
    height, width, channels = pixels.shape
    rows = np.empty((height, 1 + width * channels), dtype=np.uint8)
    rows[:, 0] = 0  # filter type "None" for each scanline
    rows[:, 1:] = pixels.reshape(height, width * channels)
    header = struct.pack(">IIBBBBB", width, height, 8, 2 if channels == 3 else 6, 0, 0, 0)
    return (_PNG_MAGIC + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + _png_chunk(b"IEND", b""))


def _is_array(value: Any) -> bool:
    return hasattr(value, "__array_interface__") or hasattr(value, "__array__")


class Image(str):
    """An encoded PNG/JPEG image that is, as a string, its data URL (see the module docstring).

    Build one with ``Image(data_url)``, ``Image.from_bytes(png)`` or ``Image.from_array(rgb)``;
    in an observation model simply assign any of those inputs to an ``Image`` field.
    """

    __slots__ = ("_raw", "height", "image_format", "width")
    #: ``png`` or ``jpeg`` (not ``format``: that name is ``str.format``).
    image_format: ImageFormat
    width: int
    height: int
    _raw: bytes | None

    def __new__(cls, value: Any) -> Image:
        return cls.coerce(value)

    @classmethod
    def _make(cls, url: str, fmt: ImageFormat, width: int, height: int) -> Image:
        image = str.__new__(cls, url)
        image.image_format, image.width, image.height = fmt, width, height
        image._raw = None
        return image

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Image:
        """PNG or JPEG bytes (the format is read from the bytes, not guessed from a name)."""
        raw = bytes(data)
        fmt, width, height = _sniff(raw)
        image = cls._make(_PREFIX[fmt] + base64.b64encode(raw).decode("ascii"), fmt, width, height)
        # Kept: a binary WebSocket frame (docs/protocol.md §12) sends these bytes without decoding.
        image._raw = raw
        return image

    @classmethod
    def from_array(cls, array: Any) -> Image:
        """A numpy ``uint8`` array, height x width x 3 (RGB) or x 4 (RGBA), encoded as PNG."""
        return cls.from_bytes(_encode_png(array))

    @classmethod
    def from_data_url(cls, url: str) -> Image:
        """A ``data:image/png;base64,...`` (or ``image/jpeg``) URL; its bytes must be that image."""
        head, sep, payload = url.partition(",")
        if not sep or not head.startswith("data:") or not head.endswith(";base64"):
            shown = url if len(url) <= 40 else url[:40] + "..."
            raise ValueError(f"not an image data URL: {shown!r}; an Image field takes "
                             "'data:image/png;base64,...', PNG/JPEG bytes, or an HxWx3 uint8 array")
        media = head[5:-7].lower()
        declared = {"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg"}.get(media)
        if declared is None:
            raise ValueError(f"an image data URL of type {media!r}; use image/png or image/jpeg")
        try:
            raw = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"the data URL's base64 payload is broken ({exc})") from None
        fmt, width, height = _sniff(raw)
        if fmt != declared:
            raise ValueError(f"the data URL says {media} but its bytes are a {fmt.upper()} image")
        # Keep the sender's string when it is already canonical (the wire value stays identical).
        url = url if head == _PREFIX[fmt][:-1] else _PREFIX[fmt] + payload
        return cls._make(url, fmt, width, height)

    @classmethod
    def coerce(cls, value: Any) -> Image:
        """Any accepted input as an ``Image``; ``ValueError`` (saying what is accepted) otherwise."""
        if isinstance(value, Image):
            return value
        if isinstance(value, str):
            return cls.from_data_url(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return cls.from_bytes(value)
        if _is_array(value):
            return cls.from_array(value)
        raise ValueError(f"an Image field takes PNG/JPEG bytes, a data:image/png;base64,... URL or an HxWx3 "
                         f"uint8 array, not {type(value).__name__}")

    @property
    def media_type(self) -> str:
        """``image/png`` or ``image/jpeg``."""
        return f"image/{self.image_format}"

    @property
    def data(self) -> bytes:
        """The encoded image (PNG or JPEG bytes)."""
        return self._raw if self._raw is not None else base64.b64decode(self.partition(",")[2])

    def to_array(self) -> np.ndarray:
        """The pixels as a height x width x 3 ``uint8`` RGB array (alpha dropped, grey expanded).

        Decoding PNG filters and JPEG needs Pillow (``pip install pillow``); encoding does not.
        """
        try:
            from PIL import Image as PILImage
        except ImportError:
            raise ImportError("decoding an Image to pixels needs Pillow: pip install pillow") from None
        import io

        import numpy as np

        with PILImage.open(io.BytesIO(self.data)) as picture:
            return np.asarray(picture.convert("RGB"), dtype=np.uint8)

    def __repr__(self) -> str:
        return f"Image({self.image_format}, {self.width}x{self.height}, {len(self)} chars)"

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilding from the facts avoids decoding the payload again on copy/pickle.
        return (_rebuild, (str(self), self.image_format, self.width, self.height))

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls.coerce, serialization=core_schema.to_string_ser_schema(when_used="json"))

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {"type": "string", "pattern": "^data:image/(png|jpeg);base64,",
                IMAGE_SCHEMA_KEY: {"formats": list(_FORMATS)}}


def _rebuild(url: str, fmt: ImageFormat, width: int, height: int) -> Image:
    return Image._make(url, fmt, width, height)


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """What an ``Image`` field promises, for ``Annotated[Image, ImageSpec(width=160, height=210)]``.

    The size (and format) go into the field's JSON Schema, so a consumer can size a buffer or a
    Gymnasium ``Box`` before the first frame; an image of another size or format is refused.
    """

    width: int | None = None
    height: int | None = None
    format: ImageFormat | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # Serialised by the wrapped schema (Image's, or its nullable union's): None stays null.
        return core_schema.no_info_after_validator_function(self._check, handler(source))

    def _check(self, image: Image | None) -> Image | None:
        if image is None:  # Annotated[Image | None, ImageSpec(...)]: the spec is about images only
            return None
        if self.format is not None and image.image_format != self.format:
            raise ValueError(f"this field holds {self.format.upper()} images, got a {image.image_format.upper()}")
        if (self.width is not None and image.width != self.width) or (
                self.height is not None and image.height != self.height):
            want = f"{self.width or '*'}x{self.height or '*'}"
            raise ValueError(f"this field holds {want} (width x height) images, got {image.width}x{image.height}")
        return image

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        out = dict(handler(schema))
        declared = dict(out.get(IMAGE_SCHEMA_KEY) or {})
        if self.format is not None:
            declared["formats"] = [self.format]
            out["pattern"] = f"^data:image/{self.format};base64,"
        if self.width is not None:
            declared["width"] = self.width
        if self.height is not None:
            declared["height"] = self.height
        out[IMAGE_SCHEMA_KEY] = declared
        return out


def image_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The image fields of a model's JSON Schema (as ``GET /schema`` gives it): field name -> its
    ``x-openenv-image`` declaration. A field that may also be text (``Image | str``) is included;
    its consumers check each value with ``is_image_value``."""
    defs = schema.get("$defs") or {}
    found: dict[str, dict[str, Any]] = {}
    for name, prop in (schema.get("properties") or {}).items():
        for option in [prop, *(prop.get("anyOf") or []), *(prop.get("oneOf") or [])]:
            ref = option.get("$ref") if isinstance(option, dict) else None
            if isinstance(ref, str):
                option = defs.get(ref.rsplit("/", 1)[-1], {})
            if isinstance(option, dict) and isinstance(option.get(IMAGE_SCHEMA_KEY), dict):
                found[name] = dict(option[IMAGE_SCHEMA_KEY])
                break
    return found


#: The key of the placeholder that stands for an image sent as a binary frame (``split_images``).
BINARY_PLACEHOLDER = "$image"


def split_images(frame: dict[str, Any]) -> list[bytes]:
    """Take the images out of an ``observation``/``observations`` frame for binary WebSocket frames.

    Every top-level ``Image`` value of an observation body becomes ``{"$image": i, "media_type":
    "image/png"}`` (``i`` counts from 0 in the frame) and its bytes the ``i``-th item of the list
    returned; the frame gets ``"binary": n`` when ``n > 0``. Only ``Image`` instances move (a
    plain string that looks like a data URL stays), so an env without declared fields sends
    exactly what it always did. The frame is changed in place (its bodies are copied first).
    """
    data = frame.get("data")
    payloads = data if isinstance(data, list) else [data]
    blobs: list[bytes] = []
    for payload in payloads:
        if not isinstance(payload, dict) or not isinstance(body := payload.get("observation"), dict):
            continue
        found = [k for k, v in body.items() if isinstance(v, Image)]
        if not found:
            continue
        body = payload["observation"] = dict(body)
        for key in found:
            image = body[key]
            body[key] = {BINARY_PLACEHOLDER: len(blobs), "media_type": image.media_type}
            blobs.append(image.data)
    if blobs:
        frame["binary"] = len(blobs)
    return blobs


def join_images(frame: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    """Put the images of the binary frames ``blobs`` back into ``frame`` as data URLs (undoes
    ``split_images``; ``ValueError`` when a placeholder names a frame that did not come)."""
    frame.pop("binary", None)
    data = frame.get("data")
    for payload in data if isinstance(data, list) else [data]:
        body = payload.get("observation") if isinstance(payload, dict) else None
        if not isinstance(body, dict):
            continue
        for key, value in body.items():
            if isinstance(value, dict) and BINARY_PLACEHOLDER in value:
                index = value[BINARY_PLACEHOLDER]
                if not isinstance(index, int) or not 0 <= index < len(blobs):
                    raise ValueError(f"observation field {key!r} names binary frame {index!r}, but "
                                     f"{len(blobs)} came")
                prefix = _PREFIX.get(str(value.get("media_type", ""))[6:])
                if prefix is None:
                    raise ValueError(f"observation field {key!r}: media_type {value.get('media_type')!r} is "
                                     "not image/png or image/jpeg")
                # The reader validates (an Image field of a typed client checks the bytes again).
                body[key] = prefix + base64.b64encode(blobs[index]).decode("ascii")
    return frame


def is_image_value(value: Any) -> bool:
    """Whether a wire value is an image data URL (PNG or JPEG), as an ``Image`` field sends it."""
    return isinstance(value, str) and value.startswith(tuple(_PREFIX.values()))
