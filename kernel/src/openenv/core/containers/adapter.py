"""``openenv.core.containers.adapter``: where the upstream-provider adapter lives, under upstream's paths.

The adapter itself is the kernel module ``openenv.upstream_providers`` (the kernel registers the
adapted providers, and never imports ``openenv.core``).
"""

from __future__ import annotations

from openenv.upstream_providers import (
    UPSTREAM_PROVIDERS_ENV,
    UpstreamProviderAdapter,
    UpstreamProviderHandle,
    adapted_provider,
    upstream_provider_refs,
)

__all__ = ["UPSTREAM_PROVIDERS_ENV", "UpstreamProviderAdapter", "UpstreamProviderHandle", "adapted_provider",
           "upstream_provider_refs"]
