"""bench.images counts what it says: the binary way leaves the base64 out of the bytes on the wire."""

from __future__ import annotations

import base64

from bench.images import KINDS, wire_bytes


def test_the_binary_way_saves_the_base64_inflation() -> None:
    for frames in KINDS.values():
        plain, binary = wire_bytes(False, frames), wire_bytes(True, frames)
        png = sum(len(f.data) for f in frames) / len(frames)
        b64 = sum(len(base64.b64encode(f.data)) for f in frames) / len(frames)
        # The same JSON around it either way: the difference is base64 minus raw, less the placeholder.
        assert 0 < plain - binary < b64 - png
        assert binary > png
