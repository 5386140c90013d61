"""``bench.evaluate``'s sampler simulation: seeded, and by-signal meets its goal on it."""

from __future__ import annotations

from bench.evaluate import zero_variance_share


def test_signal_sampling_halves_the_zero_variance_groups_of_the_simulation() -> None:
    uniform = zero_variance_share("uniform", groups=1200)
    signal = zero_variance_share("signal", groups=1200)
    assert uniform == zero_variance_share("uniform", groups=1200)  # seeded
    assert 0.7 < uniform < 0.9  # the simulated tasks are mostly all-solved or all-failed, as intended
    assert signal <= 0.5 * uniform
