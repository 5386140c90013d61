"""How a WebSocket transport knows whether the server already holds its messages against the body
budget.

``openenv.guard`` bounds HTTP bodies as they are read. A WebSocket message is read by the server's
protocol before the app sees it; the plugin ``openenvkit-serve-uvicorn`` counts those bytes
against the same ``BodyBudget`` from their first byte and marks the connection's ASGI scope with
the extension ``BUDGETED``. A transport served any other way (plain uvicorn, another ASGI server,
a test client) holds a large message against the budget itself; ``transport_hold_min`` says from
which length.
"""

from __future__ import annotations

from typing import Any

from openenv.limits import BUDGETED_MESSAGE_BYTES

__all__ = ["BUDGETED", "transport_hold_min"]

#: ASGI scope extension set on connections whose messages the server holds against the budget.
BUDGETED = "openenv.budgeted"


def transport_hold_min(scope: Any, max_message_bytes: int) -> int:
    """Length (characters) from which a WebSocket transport holds a frame against the budget
    itself: ``BUDGETED_MESSAGE_BYTES``, or never (past the message limit) when the server already
    holds the connection's messages (the scope carries ``BUDGETED``)."""
    if BUDGETED in (scope.get("extensions") or {}):
        return max_message_bytes + 1
    return BUDGETED_MESSAGE_BYTES
