"""A fresh, read-only, time-limited in-memory SQLite database per episode.

Read-only is enforced twice: ``PRAGMA query_only`` refuses writes, and an authorizer refuses every
operation that is not reading (writes, DDL, ``ATTACH``, ``PRAGMA``, transactions). A query that runs
longer than ``timeout_s`` is interrupted by a progress handler. Memory is bounded too: a value may be
at most ``MAX_VALUE_BYTES`` long, a result at most ``MAX_ROWS`` rows and ``MAX_RESULT_BYTES`` in all.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

__all__ = ["MAX_RESULT_BYTES", "MAX_ROWS", "MAX_VALUE_BYTES", "QueryError", "ReadOnlyDatabase"]

#: Results longer than this are refused (an answer never needs that many rows).
MAX_ROWS = 1_000
#: The longest string or blob a query may build (SQLite's length limit).
MAX_VALUE_BYTES = 100_000
#: The largest result, counting text and blob lengths and 8 bytes per other value.
MAX_RESULT_BYTES = 4_000_000

_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
            getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


class QueryError(Exception):
    """The query failed: a SQL error, a refused operation, a timeout or too many rows."""


def _authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, trigger: str | None) -> int:
    return sqlite3.SQLITE_OK if action in _ALLOWED else sqlite3.SQLITE_DENY


def _normalise(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, bytes):
        return value.hex()
    return value


class ReadOnlyDatabase:
    """An in-memory database built from ``schema_script``, then locked to reading."""

    def __init__(self, schema_script: str, *, timeout_s: float = 1.0) -> None:
        self.timeout_s = timeout_s
        self._conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._conn.executescript(schema_script)
        self._conn.execute("PRAGMA query_only = ON")
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self._conn.setlimit(sqlite3.SQLITE_LIMIT_COLUMN, 100)
        self._conn.set_authorizer(_authorize)
        self._deadline = 0.0
        self._conn.set_progress_handler(self._progress, 1000)

    def _progress(self) -> int:
        return 1 if time.monotonic() > self._deadline else 0

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run one statement; its column names and rows (floats rounded to 6 places)."""
        self._deadline = time.monotonic() + self.timeout_s
        try:
            cursor = self._conn.execute(sql)
            rows, size = [], 0
            for row in cursor:  # one row at a time, so the size check bounds memory
                size += sum(len(v) if isinstance(v, str | bytes) else 8 for v in row)
                rows.append(row)
                if len(rows) > MAX_ROWS:
                    raise QueryError(f"the query returned more than {MAX_ROWS} rows")
                if size > MAX_RESULT_BYTES:
                    raise QueryError(f"the result is larger than {MAX_RESULT_BYTES:,} bytes")
        except sqlite3.Warning as exc:  # e.g. "You can only execute one statement at a time."
            raise QueryError(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            message = str(exc)
            if message == "interrupted":
                message = f"query interrupted after the {self.timeout_s:g} s time limit"
            elif message == "not authorized":
                message = "not authorized: the database is read-only (only SELECT queries are allowed)"
            raise QueryError(message) from None
        except (sqlite3.ProgrammingError, ValueError, OverflowError) as exc:
            raise QueryError(str(exc)) from None
        columns = [d[0] for d in cursor.description or []]
        return columns, [tuple(_normalise(v) for v in row) for row in rows]

    def schema_sql(self) -> str:
        rows = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
        return ";\n".join(r[0] for r in rows) + ";"

    def close(self) -> None:
        self._conn.close()

