"""The kit's snapshot-capable random walk, with a server that dies once mid-episode on request
(``WALK_CRASH``: a marker file path; the first server to reach step 5 writes it and exits), or that
SIGKILLs the collection driving it (``WALK_KILL_PARENT``, the same way: ``collect`` killed -9)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from openenv.testing import WalkAction, WalkEnv, WalkObservation


class CrashWalk(WalkEnv):
    def step(self, action: WalkAction, timeout_s: float | None = None, **kwargs: Any) -> WalkObservation:  # type: ignore[override]
        marker = os.environ.get("WALK_CRASH")
        if marker and self.state.step_count == 4 and not Path(marker).exists():
            Path(marker).write_text("crashed")
            os._exit(3)
        killer = os.environ.get("WALK_KILL_PARENT")
        if killer and self.state.step_count == 4 and not Path(killer).exists():
            Path(killer).write_text("killed")
            os.kill(os.getppid(), signal.SIGKILL)  # the collection, mid-episode
            os._exit(3)
        return super().step(action, timeout_s=timeout_s, **kwargs)
