"""The ``bwrap`` provider: env servers in rootless bubblewrap sandboxes. Import the provider from
``openenv_provider_bwrap.provider``; this package imports nothing heavy on its own."""

from __future__ import annotations

__all__: list[str] = []
