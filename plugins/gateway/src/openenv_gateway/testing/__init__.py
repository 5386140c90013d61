"""Test helpers of the gateway: a real tiny-model inference server (``model_server``, needs the
``testmodel`` extra) and a bounded subprocess starter (``process``)."""

from __future__ import annotations

__all__: list[str] = []
