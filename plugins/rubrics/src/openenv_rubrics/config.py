"""Rubrics from text: ``NAME[=CONFIG]`` specs and ``build_rubric(name, config)``.

The implementation lives in the kernel (``openenv.rubric_spec``) because the server resolves
``openenv serve --rubric`` and ``rubric:`` in ``openenv.yaml`` without importing this package; this
module re-exports it (one implementation).
"""

from __future__ import annotations

from openenv.rubric_spec import accepted_options, build_rubric, parse_config, parse_spec, rubric_from_spec

__all__ = ["accepted_options", "build_rubric", "parse_config", "parse_spec", "rubric_from_spec"]
