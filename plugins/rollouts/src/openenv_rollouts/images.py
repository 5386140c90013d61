"""Image observations in rollout files: stored once as files beside the JSONL, referenced by path.

An observation field the env's schema declares as an image (``openenv.types.Image``,
``x-openenv-image``) arrives as a data URL. Inline, every step of a 1,000-step Atari episode would
carry ~10 kB of base64 in the JSONL; here each distinct image is written once, as
``<records stem>.images/<sha256>.png`` (content-addressed: a frame that repeats is stored once), and
the record keeps a reference in its place::

    {"image": "rollouts.images/3f1c....png", "sha256": "3f1c...", "media_type": "image/png",
     "width": 160, "height": 210}

``image`` is relative to the folder of the JSONL file, so the pair can be moved together.
``load_image`` reads one back (checking the hash); ``openenv_rollouts.export`` also copies the
bytes into the Parquet file's ``images`` column, so a Parquet file stands alone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from openenv.images import Image, is_image_value

__all__ = ["ImageStore", "image_refs", "images_folder", "is_image_ref", "load_image"]

_SUFFIX = {"png": ".png", "jpeg": ".jpg"}


def images_folder(records: Path) -> Path:
    """Where the images of the rollout file ``records`` go: ``<stem>.images`` beside it."""
    return records.with_name(records.stem + ".images")


def is_image_ref(value: Any) -> bool:
    """Whether a stored observation value is a reference written by ``ImageStore``."""
    return isinstance(value, dict) and isinstance(value.get("image"), str) and isinstance(value.get("sha256"), str)


class ImageStore:
    """Writes the images of one rollout file (``records``) and swaps them for references."""

    def __init__(self, records: Path, fields: Collection[str]) -> None:
        self.fields = frozenset(fields)
        self.root = records.parent
        self.folder = images_folder(records)
        self._known: set[str] = set()
        self.written = 0

    def put(self, value: str) -> dict[str, Any]:
        """Store the image data URL ``value`` (once per distinct image); its reference."""
        image = Image(value)
        data = image.data
        digest = hashlib.sha256(data).hexdigest()
        path = self.folder / (digest + _SUFFIX[image.image_format])
        if digest not in self._known:
            if not path.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                # Written under a temporary name and renamed: a killed run never leaves half an image
                # under a name a record points at.
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_bytes(data)
                tmp.replace(path)
                self.written += 1
            self._known.add(digest)
        return {"image": path.relative_to(self.root).as_posix(), "sha256": digest,
                "media_type": image.media_type, "width": image.width, "height": image.height}

    def externalize(self, observation: Any) -> Any:
        """``observation`` with its declared image fields as references (a copy; the input is kept).
        A field holding text (an ``Image | str`` field) or nothing stays as it is."""
        if not self.fields or not isinstance(observation, dict):
            return observation
        found = [k for k in self.fields if is_image_value(observation.get(k))]
        if not found:
            return observation
        out = dict(observation)
        for key in found:
            out[key] = self.put(out[key])
        return out


def load_image(ref: dict[str, Any], base: Path | str) -> Image:
    """The ``Image`` a reference points at; ``base`` is the folder of the JSONL file (or the file).

    Raises ``FileNotFoundError`` (the images folder was not copied with the records) or
    ``ValueError`` (the file's bytes are not the ones recorded).
    """
    folder = Path(base)
    if folder.is_file():
        folder = folder.parent
    path = folder / str(ref["image"])
    if not path.exists():
        raise FileNotFoundError(f"{path}: the image of this record is missing; copy the "
                                f"{Path(str(ref['image'])).parent} folder along with the JSONL file")
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != ref["sha256"]:
        raise ValueError(f"{path}: its bytes do not match the recorded sha256 {ref['sha256']} (changed after "
                         "the run?)")
    return Image.from_bytes(data)


def image_refs(value: Any) -> Iterator[dict[str, Any]]:
    """Every image reference in a stored value (observations are dicts; the walk is shallow-first)."""
    if is_image_ref(value):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from image_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from image_refs(item)
