"""A gateway in front of the scripted upstream (no model): key handling, translation, bad input."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_gateway import CaptureGateway, GatewayLimits
from openenv_gateway.serving import ThreadServer
from openenv_gateway.testing.scripted import build_scripted_app


@pytest.fixture(scope="module")
def scripted_url() -> Iterator[str]:
    server = ThreadServer(build_scripted_app(slow_s=1.0))
    yield server.start()
    server.stop()


@pytest.fixture
def gateway(scripted_url: str) -> Iterator[CaptureGateway]:
    gw = CaptureGateway(scripted_url, limits=GatewayLimits(max_body_bytes=64 * 1024, max_concurrent_per_episode=2,
                                                           upstream_timeout_s=10))
    gw.start()
    yield gw
    gw.stop()
