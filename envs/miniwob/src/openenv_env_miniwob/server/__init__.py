"""ASGI entry point named by ``openenv.yaml`` (``app: server.app:app``)."""
