"""``openenv import verifiers:<module>`` on the tasksets that verifiers 0.4 itself ships (from the index).

No published verifiers environment loads with verifiers 0.4 and imports (docs/coming-from-openenv.md,
"Still different", lists the packages tried); the tasksets inside the ``verifiers`` 0.4 distribution
are the ones from the index that its ``verifiers.v1`` API runs. None of them is a single-turn taskset
built from its defaults: TextArena needs its extra, Harbor its CLI and containers, NeMo Gym a
dataset, the OpenEnv taskset an env to wrap. Each is refused with one ``error:`` line (exit 2) that
carries the taskset's own reason, and nothing is written. Runs in ``nox -s verifiers``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="needs verifiers (nox -s verifiers)")

CASES = {
    "verifiers.v1.tasksets.textarena": "textarena requires nltk and textarena",
    "verifiers.v1.tasksets.harbor": "HarborTaskset.load() failed: RuntimeError: Harbor tasksets require the Harbor CLI",
    "verifiers.v1.tasksets.nemo_gym": "NeMoGymTaskset(NeMoGymConfig()) failed: ValidationError",
    "verifiers.v1.tasksets.openenv": "pass `env` or `base_url`",
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_a_shipped_taskset_that_cannot_import_is_one_line(module: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-m", "openenv", "import", f"verifiers:{module}", "-o", "pkg"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and CASES[module] in line, line
    assert list(tmp_path.iterdir()) == []
