"""Renders of the Gymnasium env: the env's text (``ansi``) or its image (``rgb_array``) as an ``Image``.

An image is an ``openenv.types.Image``: on the wire ``data:image/png;base64,...``, the shape the web
page (``plugins/web``) shows as a picture. Pillow encodes it (it compresses better than the
kernel's own filter-less PNG encoder, and keeps the bytes the env always sent).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from openenv.errors import ValidationError
from openenv.types import Image

__all__ = ["RENDER_CHOICES", "checked", "choose_mode", "png_image"]

#: What ``reset(render=...)`` accepts: ``True`` picks text when the env has it, else an image.
RENDER_CHOICES = (False, True, "ansi", "rgb_array")


def checked(requested: Any) -> bool | str:
    """``reset``'s ``render`` option, refused unless it is one of ``RENDER_CHOICES`` (None: False)."""
    if requested is None:
        return False
    # By identity for the bools: 1 == True, and a cached env must not be reused for a wrong value.
    if not any(requested is c or (isinstance(c, str) and requested == c) for c in RENDER_CHOICES):
        raise ValidationError(f"render must be one of {list(RENDER_CHOICES)}, got {requested!r}")
    return requested  # type: ignore[no-any-return]


def choose_mode(env_id: str, requested: Any, modes: list[str]) -> str | None:
    """The render mode to make ``env_id`` with, or None for no render; a refusal says what fits."""
    if checked(requested) is False:
        return None
    served = [m for m in ("ansi", "rgb_array") if m in modes]
    if requested is True:
        if served:
            return served[0]
        raise ValidationError(f"{env_id} has neither a text (ansi) nor an image (rgb_array) render (its render "
                              f"modes: {modes}). Reset with render=False.")
    if requested not in modes:
        fix = f"render={served[0]!r}" if served else "render=False"
        raise ValidationError(f"{env_id} has no {requested!r} render (its render modes: {modes}). Reset with {fix}.")
    return str(requested)


def png_image(frame: Any) -> Image:
    """An ``rgb_array`` frame (height x width x 3 or 4, uint8) as a PNG ``Image``."""
    from PIL import Image as PILImage

    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"an rgb_array frame is height x width x 3 (or 4), got shape {array.shape}")
    buffer = io.BytesIO()
    PILImage.fromarray(array.astype(np.uint8), "RGB" if array.shape[2] == 3 else "RGBA").save(buffer, "PNG")
    return Image.from_bytes(buffer.getvalue())
