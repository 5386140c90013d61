"""The ``openenv`` command line. Each command group lives in its own module with a ``register(app)``."""
