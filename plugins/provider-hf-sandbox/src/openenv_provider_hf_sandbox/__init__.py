"""openenvkit-provider-hf-sandbox: env servers in Hugging Face Jobs sandboxes
(``openenv_provider_hf_sandbox.provider``)."""
