"""The model-backed gateway tests (``nox -s gateway``): a real tiny transformers model served by
``openenv_gateway.testing.model_server`` on 127.0.0.1, built on the spot (nothing downloaded).

Without torch/transformers these tests skip, except under ``OPENENV_REQUIRE_TESTMODEL=1`` (the
``gateway`` session sets it), where a missing model stack fails them instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _require_model_stack() -> None:
    for module in ("torch", "transformers", "tokenizers", "openai", "anthropic", "trl", "datasets"):
        try:
            __import__(module)
        except ImportError:
            if os.environ.get("OPENENV_REQUIRE_TESTMODEL") == "1":
                pytest.fail(f"{module} is not installed but OPENENV_REQUIRE_TESTMODEL=1: run `nox -s gateway`")
            pytest.skip(f"the model-backed gateway tests need {module} (run `nox -s gateway`)")


@pytest.fixture
def model_stack() -> None:
    """For tests that start their own model server: skip (or fail in `nox -s gateway`) without the stack."""
    _require_model_stack()


@pytest.fixture(scope="session")
def model_url() -> Iterator[str]:
    _require_model_stack()
    from openenv_gateway.testing.process import model_server

    with model_server("--max-tokens-cap", "32") as server:
        yield server.base_url


@pytest.fixture
def gateway(model_url: str) -> Iterator[object]:
    from openenv_gateway import CaptureGateway

    gw = CaptureGateway(model_url)
    gw.start()
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def echo_server() -> Iterator[tuple[str, str]]:
    """The echo env served by the local provider: (base URL, token)."""
    import secrets

    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("echo", None))()
    token = secrets.token_urlsafe(16)
    handle = provider.start(LaunchSpec(env="echo", max_sessions=8, token=token))
    yield handle.base_url, token
    handle.stop()
