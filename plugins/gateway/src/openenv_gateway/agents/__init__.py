"""Agent programs that ship with the gateway plugin, run by a harness as black boxes.

``python -m openenv_gateway.agents.simple``: a small coding agent over the ``openai`` SDK (the
``agents`` extra) that writes its answer to a file and checks it before it stops.
"""

from __future__ import annotations

__all__: list[str] = []
