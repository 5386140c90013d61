"""openenvkit-import-verifiers: ``openenv import verifiers:<module>`` / ``ors:PATH_OR_MODULE`` and
the env classes the generated packages subclass (``openenv_import_verifiers.env.VerifiersEnv``,
``openenv_import_verifiers.ors_env.OrsEnv``)."""

from __future__ import annotations

__all__: list[str] = []
