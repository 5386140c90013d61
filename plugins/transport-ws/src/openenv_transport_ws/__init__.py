"""OpenEnv /ws WebSocket transport: server endpoint and client connector."""
