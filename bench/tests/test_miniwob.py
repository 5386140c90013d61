"""bench.miniwob measures what it says: every session plays its steps, RSS counts the browser."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv_env_miniwob")

from bench.miniwob import measure, tree_pss_mib
from openenv_env_miniwob.browser import chromium_path

pytestmark = pytest.mark.browser


@pytest.mark.skipif(chromium_path() is None, reason="no Chromium at /usr/bin/chromium")
def test_every_session_plays_its_steps_and_the_browser_is_counted() -> None:
    before = tree_pss_mib()
    row = measure(2, 3)
    assert row["steps"] == 6 and row["steps_per_s"] > 0 and row["sessions"] == 2
    assert row["pss_total_mib"] > before  # the browser's processes were counted while open
    assert row["pss_per_session_mib"] == round(row["pss_total_mib"] / 2, 1)
