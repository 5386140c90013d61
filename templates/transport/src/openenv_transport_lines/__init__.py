"""A minimal WebSocket transport at ``/lines`` (server endpoint and client connector)."""
