"""Issue 32, import level: upstream's top-level names, helpers beside unsupported ones, ``HTTPEnvServer``.

Written from upstream's documented behaviour: ``from openenv import AutoEnv, AutoAction`` is the
first line of its getting-started guide; ``AutoAction.from_env(name)`` returns the env's action
class and ``AutoEnv.from_env(name, base_url=...)`` a client of that env; ``GenericAction`` is a
dict built from keywords; ``load_environment_metadata(factory)`` never builds the env.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from layer_helpers import serving
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient
from upstream_style_echo.models import UpstreamStyleEchoAction, UpstreamStyleEchoObservation
from upstream_style_echo.server import UpstreamStyleEchoEnvironment

from openenv.core._unsupported import UnsupportedFeature
from openenv.errors import UnknownNameError


def test_getting_started_imports() -> None:
    from openenv import AutoAction, AutoEnv, GenericAction

    assert GenericAction(message="hi") == {"message": "hi"}
    assert AutoAction.from_env("echo", skip_install=True) is GenericAction
    with pytest.raises(TypeError, match="from_env"):
        AutoEnv()


def test_auto_action_is_the_installed_env_s_action_class() -> None:
    from openenv import AutoAction
    from openenv_env_echo.models import EchoAction

    for name in ("echo", "echo-env", "echo_env", "openenv/echo-env", "https://huggingface.co/spaces/openenv/echo_env"):
        assert AutoAction.from_env(name) is EchoAction
    with pytest.raises(UnknownNameError, match="echo"):
        AutoAction.from_env("ecoh-env")


def test_auto_env_with_base_url_is_a_typed_client() -> None:
    from openenv import AutoAction, AutoEnv
    from openenv.server import create_app

    with serving(create_app("echo")) as url:
        EchoAction = AutoAction.from_env("echo-env")
        env = AutoEnv.from_env("echo-env", base_url=url)
        try:
            result = env.reset()
            assert result.observation.echoed_message == "ready"
            result = env.step(EchoAction(message="hello"))
            assert result.observation.echoed_message == "hello" and not result.done
            assert env.state().step_count == 1
        finally:
            env.close()


def test_auto_env_without_a_server_at_base_url_says_so() -> None:
    from openenv import AutoEnv

    with pytest.raises(ConnectionError, match=r"Server not available at http://127\.0\.0\.1:9"):
        AutoEnv.from_env("echo", base_url="http://127.0.0.1:9")


def test_auto_env_starts_the_installed_env() -> None:
    from openenv import AutoAction, AutoEnv

    env = AutoEnv.from_env("echo")
    try:
        assert env.step(AutoAction.from_env("echo")(message="x")).observation.echoed_message == "x"
    finally:
        env.close()


def test_web_interface_helpers_import_beside_the_unsupported_ui() -> None:
    # One import line with a supported helper and the unsupported UI: only the call fails.
    from openenv.core.env_server import create_web_interface_app as top_level
    from openenv.core.env_server.web_interface import create_web_interface_app, load_environment_metadata

    meta = load_environment_metadata(UpstreamStyleEchoEnvironment, "upstream_style_echo")
    assert meta.name == "UpstreamStyleEchoEnvironment"
    for refused in (create_web_interface_app, top_level):
        with pytest.raises(UnsupportedFeature, match="create_app") as info:
            refused(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction, UpstreamStyleEchoObservation)
        assert "docs/coming-from-openenv.md" in str(info.value)


def test_load_environment_metadata_reads_the_readme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv.core.env_server.web_interface import load_environment_metadata

    (tmp_path / "README.md").write_text("# My env\n")
    monkeypatch.setenv("ENV_README_PATH", str(tmp_path / "README.md"))
    assert load_environment_metadata(lambda: None, "my_env").readme_content == "# My env\n"
    assert load_environment_metadata(UpstreamStyleEchoEnvironment()).name  # an instance: its own get_metadata


def test_an_app_importing_the_web_ui_still_serves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "webby_app.py").write_text(textwrap.dedent("""
        import os
        from openenv.core.env_server.http_server import create_app
        from openenv.core.env_server.web_interface import create_web_interface_app, load_environment_metadata
        from upstream_style_echo.models import UpstreamStyleEchoAction, UpstreamStyleEchoObservation
        from upstream_style_echo.server import UpstreamStyleEchoEnvironment

        if os.environ.get("ENABLE_WEB_INTERFACE") == "true":
            app = create_web_interface_app(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction,
                                           UpstreamStyleEchoObservation)
        else:
            app = create_app(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction, UpstreamStyleEchoObservation)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("webby_app", None)
    import webby_app  # type: ignore[import-not-found]

    with TestClient(webby_app.app) as client:
        assert client.post("/reset", json={}).json()["observation"]["echoed_message"]


def test_http_env_server_subclass_registers_routes_on_its_app() -> None:
    from openenv.core.env_server import HTTPEnvServer

    class MyServer(HTTPEnvServer):
        registered = False

        def register_routes(self, app, mode=None):  # type: ignore[no-untyped-def]
            super().register_routes(app, mode)
            type(self).registered = True

    async def hello(_request):  # type: ignore[no-untyped-def]
        return PlainTextResponse("hello")

    app = Starlette(routes=[Route("/hello", hello)])
    MyServer(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction, UpstreamStyleEchoObservation).register_routes(app)
    assert MyServer.registered
    with TestClient(app) as client:
        assert client.get("/hello").text == "hello"
        assert client.get("/health").status_code == 200
        assert client.post("/step", json={"action": {"message": "yo"}}).json()["observation"]["echoed_message"] == "yo"
        with client.websocket_connect("/ws") as ws:
            ws.send_json({"type": "reset", "data": {}})
            assert ws.receive_json()["type"] == "observation"


def test_http_env_server_keeps_create_app_s_rules() -> None:
    from openenv.core.env_server import HTTPEnvServer

    with pytest.raises(TypeError, match="not an instance"):
        HTTPEnvServer(UpstreamStyleEchoEnvironment(), UpstreamStyleEchoAction, UpstreamStyleEchoObservation)
