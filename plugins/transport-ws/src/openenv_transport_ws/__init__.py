"""OpenEnv /ws WebSocket transport: server endpoint and client connector.

Import the pieces from their modules (``openenv_transport_ws.server``, ``.client``); this package
module stays empty so that loading the plugin entry point imports nothing heavy.
"""
