"""openenvkit-provider-modal: env servers in Modal sandboxes (``openenv_provider_modal.provider``)."""
