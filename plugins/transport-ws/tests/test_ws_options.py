"""The ws transport declares its options (``WebSocketOptions``); they are checked at start-up."""

from __future__ import annotations

from typing import Any

import pytest
from ws_support import EchoEnv, plugin_manager

from openenv.errors import ConfigError
from openenv.server import create_app
from openenv_transport_ws.frames import MAX_BATCH_ACTIONS
from openenv_transport_ws.server import WebSocketOptions, WebSocketTransport


def _ws(**settings: Any) -> WebSocketTransport:
    app = create_app(EchoEnv, transports=["ws"], plugin_manager=plugin_manager(), **settings)
    transport = app.state.ctx.transports[0]
    assert isinstance(transport, WebSocketTransport)
    return transport


def test_options_are_declared_typed_and_defaulted() -> None:
    assert WebSocketTransport.options_type is WebSocketOptions
    assert _ws().max_batch_actions == MAX_BATCH_ACTIONS
    assert _ws(transport_options={"ws": {"max_batch_actions": 7}}).max_batch_actions == 7
    assert _ws(transport_options={"ws": {"max_batch_actions": "5"}}).max_batch_actions == 5
    assert _ws().ctx.options_for(WebSocketTransport) == WebSocketOptions()


@pytest.mark.parametrize(("settings", "message"), [
    ({"max_batch_actions": 3}, "Unknown server setting 'max_batch_actions'.*transport_options=\\{'<transport>'"),
    ({"max_sesions": 3}, "Unknown server setting 'max_sesions'. Did you mean 'max_sessions'"),
    ({"extra": {"max_batch_actions": 3}}, "'extra' was removed.*transport_options=\\{'ws'"),
    ({"workers": 2}, "'workers' was removed.*several servers"),
    ({"pool_size": 8}, "'pool_size' was removed"),
    ({"transport_options": {"ws": {"max_batch_actions": 0}}},
     "Invalid options for transport 'ws': max_batch_actions: Input should be greater than or equal to 1"),
    ({"transport_options": {"ws": {"turbo": True}}}, "turbo: Extra inputs are not permitted.*max_batch_actions"),
    ({"transport_options": {"rest": {"x": 1}}}, "'rest', which is not mounted. Mounted transports: ws"),
])
def test_bad_options_fail_at_start_up_naming_the_fix(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _ws(**settings)
