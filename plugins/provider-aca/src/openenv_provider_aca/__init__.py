"""openenvkit-provider-aca: env servers in Azure Container Apps sandboxes (``openenv_provider_aca.provider``)."""
