"""openenvkit-provider-e2b: env servers in E2B sandboxes (``openenv_provider_e2b.provider``)."""
