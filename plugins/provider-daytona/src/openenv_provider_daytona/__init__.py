"""openenvkit-provider-daytona: env servers in Daytona sandboxes (``openenv_provider_daytona.provider``)."""
