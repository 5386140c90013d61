"""openenvkit-provider-novita: env servers in Novita Agent Sandboxes (``openenv_provider_novita.provider``)."""
