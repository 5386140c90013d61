"""On-disk records of the servers this machine's local providers started.

One JSON file per server in the state directory: ``{id, provider, pid, pgid, start_ticks, owner,
base_url, env, log, created_at}``. The directory is ``$OPENENV_STATE_DIR``, else
``$XDG_RUNTIME_DIR/openenv/local``, else ``~/.cache/openenv/local``. Records are written atomically
(write to a temporary file, then rename) so a reader never sees half a record.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from openenv_provider_local.process import group_members, proc_stat

__all__ = ["Record", "delete_record", "read_records", "state_dir", "write_record"]


def state_dir() -> Path:
    """Where records (and server logs) live; created on first use, private to the user."""
    override = os.environ.get("OPENENV_STATE_DIR")
    if override:
        path = Path(override)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"]) / "openenv" / "local"
    else:
        path = Path.home() / ".cache" / "openenv" / "local"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


@dataclass
class Record:
    """One server started by a local provider."""

    id: str
    provider: str
    pid: int
    pgid: int
    owner: str
    base_url: str | None = None
    env: str | None = None
    log: str | None = None
    start_ticks: str | None = None
    created_at: float = 0.0

    def process_alive(self) -> bool:
        """Whether the recorded server (its leader, or any process left in its group) still runs.

        A leader pid now used by another program (different start time) does not count.
        """
        st = proc_stat(self.pid)
        if st is not None and self.start_ticks is not None and st.start_ticks != self.start_ticks:
            # The pid was reused, which POSIX allows only once the old group is gone.
            return False
        if st is not None and st.alive:
            return True
        # The leader exited, but members may live on (the Python server under a `uv run` leader).
        return bool(group_members(self.pgid))


def write_record(record: Record) -> None:
    """Create or replace ``record`` atomically."""
    directory = state_dir()
    fd, tmp = tempfile.mkstemp(prefix=f".{record.id}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(asdict(record), f)
        os.replace(tmp, directory / f"{record.id}.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def delete_record(record_id: str) -> None:
    """Remove a record (no error if it is already gone)."""
    with contextlib.suppress(FileNotFoundError):
        (state_dir() / f"{record_id}.json").unlink()


def read_records(provider: str | None = None) -> list[Record]:
    """Every readable record (of ``provider`` if given); unreadable files are skipped."""
    records = []
    for path in sorted(state_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = Record(**data)
        except (OSError, ValueError, TypeError):
            continue
        if provider is None or record.provider == provider:
            records.append(record)
    return records
