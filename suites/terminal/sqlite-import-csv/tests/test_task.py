"""Verifier of sqlite-import-csv: schema (types, keys), every row as integers, and the view."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
db = Path("/app/inventory.db")
if not db.is_file():
    sys.exit(f"FAIL: {db} was not created")
# Work on a copy: the grading box may not let us write next to the agent's file.
copy = Path(tempfile.mkdtemp()) / "inventory.db"
shutil.copy(db, copy)
con = sqlite3.connect(copy)
try:
    def columns(table: str) -> list[tuple[str, str, int, int]]:
        # (name, declared type, not null, position in the primary key)
        return [(r[1], r[2].upper(), r[3], r[5]) for r in con.execute(f"PRAGMA table_info({table})")]

    want_products = [("sku", "TEXT", 0, 1), ("name", "TEXT", 1, 0), ("price_cents", "INTEGER", 1, 0)]
    got = columns("products")
    # a TEXT PRIMARY KEY column may or may not carry NOT NULL
    if [(n, t, p) for n, t, _, p in got] != [(n, t, p) for n, t, _, p in want_products] or got[1][2] != 1 \
            or got[2][2] != 1:
        sys.exit(f"FAIL: products columns {got!r}")
    got = columns("stock")
    if got != [("sku", "TEXT", 1, 1), ("warehouse", "TEXT", 1, 2), ("qty", "INTEGER", 1, 0)]:
        sys.exit(f"FAIL: stock columns {got!r}")
    rows = [list(r) for r in con.execute("SELECT sku, name, price_cents FROM products ORDER BY sku")]
    if rows != sorted(expected["products"]):
        sys.exit("FAIL: products rows differ from products.csv")
    rows = [list(r) for r in con.execute("SELECT sku, warehouse, qty FROM stock ORDER BY sku, warehouse")]
    if rows != sorted(expected["stock"]):
        sys.exit("FAIL: stock rows differ from stock.csv")
    bad = con.execute("SELECT COUNT(*) FROM stock WHERE typeof(qty) != 'integer'").fetchone()[0] + con.execute(
        "SELECT COUNT(*) FROM products WHERE typeof(price_cents) != 'integer'").fetchone()[0]
    if bad:
        sys.exit(f"FAIL: {bad} numbers are stored as text")
    rows = [list(r) for r in con.execute("SELECT sku, name, total_qty FROM low_stock ORDER BY sku")]
    if rows != expected["low_stock"]:
        sys.exit(f"FAIL: low_stock gives {rows!r}, expected {expected['low_stock']!r}")
except sqlite3.Error as exc:
    sys.exit(f"FAIL: {exc}")
print("ok")
