"""openenvkit-provider-ray: env servers as Ray actors (``openenv_provider_ray.provider``)."""
