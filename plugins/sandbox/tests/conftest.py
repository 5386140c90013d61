from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_sandbox import Limits, Sandbox

UID_BASE = 62000
SLOTS = 64


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(Limits(cpu_time_s=3, wall_time_s=3.0), slots=SLOTS, uid_base=UID_BASE)
    try:
        yield box
    finally:
        box.close()
