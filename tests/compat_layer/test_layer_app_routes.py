"""Routes an upstream env app adds to what ``create_app`` returns (``@app.get``, ``@app.post``,
``add_api_route``, ``include_router``): served with FastAPI's semantics, behind the kernel's
request limits and token check, and kept when ``openenv serve`` rebuilds the app with its options.

Upstream's ``create_app`` returned a FastAPI app, so its documented way to add an endpoint is a
FastAPI decorator on it; FastAPI is what upstream's ``openenv-core`` installed.
"""

from __future__ import annotations

import httpx
import pytest
from layer_helpers import serving

pytest.importorskip("fastapi")

from openenv.core.env_server.http_server import UpstreamApp
from openenv.server import create_app as kernel_create_app


@pytest.fixture(scope="module")
def triage_app() -> UpstreamApp:
    from upstream_style_triage.server.app import app

    return app


def test_decorated_routes_serve_beside_the_env(triage_app: UpstreamApp) -> None:
    with serving(triage_app) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/safety_rules").json() == {"rules": {"chest pain": "emergency", "mild cough": "routine"}}
        assert http.get("/safety_rules", params={"case": "mild cough"}).json() == {"rules": {"mild cough": "routine"}}
        missing = http.get("/safety_rules", params={"case": "rash"})
        assert missing.status_code == 404 and "rash" in missing.text
        assert http.post("/grade", json={"case": "chest pain", "urgency": "emergency"}).json() == {"safe": True}
        assert http.post("/grade", json={"case": "chest pain", "urgency": "routine"}).json() == {"safe": False}
        bad = http.post("/grade", json={"case": "chest pain"})  # FastAPI's validation: 422 naming the field
        assert bad.status_code == 422 and "urgency" in bad.text
        assert http.get("/cases/chest pain").json() == {"name": "chest pain", "known": True}  # include_router
        assert http.get("/ping").json() == {"pong": True}  # add_api_route
        # The env's own routes are untouched.
        reset = http.post("/reset", json={"seed": 0})
        assert reset.status_code == 200 and reset.json()["observation"]["case"] == "chest pain"
        assert http.get("/health").status_code == 200


def test_rebuilt_app_keeps_the_routes_behind_the_token_and_limits(triage_app: UpstreamApp) -> None:
    # What `openenv serve upstream_style_triage.server.app:app --token ...` does with the app.
    rebuilt = kernel_create_app(triage_app, token="s3cret", max_message_bytes=2048)
    assert isinstance(rebuilt, UpstreamApp)
    auth = {"Authorization": "Bearer s3cret"}
    with serving(rebuilt) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/safety_rules").status_code == 401
        assert http.post("/grade", json={"case": "x", "urgency": "y"}).status_code == 401
        assert http.get("/safety_rules", headers=auth).json()["rules"]["mild cough"] == "routine"
        big = http.post("/grade", headers=auth, json={"case": "x" * 8192, "urgency": "routine"})
        assert big.status_code == 413  # the request guard runs before the route
        assert http.post("/grade", headers=auth, json={"case": "x"}).status_code == 422
        assert http.get("/cases/mild cough", headers=auth).json()["known"] is True


def test_decorators_are_fastapis(triage_app: UpstreamApp) -> None:
    from fastapi.routing import APIRoute

    paths = {r.path for r in triage_app.router.routes if isinstance(r, APIRoute)}
    assert {"/safety_rules", "/grade", "/ping"} <= paths


def test_without_fastapi_the_decorator_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from upstream_style_echo.models import UpstreamStyleEchoAction, UpstreamStyleEchoObservation
    from upstream_style_echo.server import UpstreamStyleEchoEnvironment

    from openenv.core import UnsupportedFeature
    from openenv.core.env_server import create_app

    app = create_app(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction, UpstreamStyleEchoObservation)
    monkeypatch.setitem(sys.modules, "fastapi", None)  # as if it were not installed
    with pytest.raises(UnsupportedFeature, match=r"pip install 'openenvkit\[fastapi\]'") as info:
        app.get("/info")
    assert "app.add_route" in str(info.value)


def test_an_attribute_error_inside_the_app_module_is_not_blamed_on_the_reference() -> None:
    from openenv.cli.serve_cmd import _load_failure

    inside = AttributeError("'Starlette' object has no attribute 'get'", name="get")
    assert "Check the name after the colon" not in _load_failure("my_env.server.app:app", inside)
    missing = AttributeError("module 'my_env.server.app' has no attribute 'ap'", name="ap")
    assert "Check the name after the colon" in _load_failure("my_env.server.app:ap", missing)
