"""``training_sampling``: check that a sampling policy is a full-vocabulary training one."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["NON_POLICY_SAMPLING", "training_sampling"]

#: Sampling knobs that must stay at these no-op values when training on the samples.
NON_POLICY_SAMPLING: dict[str, float | int] = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0,
                                               "presence_penalty": 0.0, "repetition_penalty": 1.0}


def training_sampling(sampling: dict[str, Any] | None) -> dict[str, float | int]:
    """``sampling`` checked (a finite positive temperature; other knobs at their no-op values)."""
    if sampling is None:
        return {}
    if not isinstance(sampling, dict):
        raise ValueError("sampling must be a JSON object")
    unknown = sorted(set(sampling) - {"temperature", *NON_POLICY_SAMPLING})
    if unknown:
        raise ValueError(f"unsupported training sampling fields: {', '.join(unknown)}")
    temperature = sampling.get("temperature")
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not (
            temperature > 0 and math.isfinite(temperature)):
        raise ValueError("training sampling requires a finite positive temperature")
    for key, value in sampling.items():
        if key == "temperature":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"training sampling {key} must be numeric")
        if key == "top_k" and value == 0:
            continue
        if value != NON_POLICY_SAMPLING[key]:
            raise ValueError(f"training sampling {key}={value} truncates the distribution; use "
                             f"{NON_POLICY_SAMPLING[key]} (the samples must be on-policy)")
    return dict(sampling)
