"""Generated inputs and expected answers of the data-wrangling tasks (see _make.py)."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DATA"]

FIRST = ["Ada", "Grace", "Linus", "Margaret", "Ken", "Barbara", "Dennis", "Frances", "Edsger", "Radia", "Alan",
         "Hedy", "John", "Katherine", "Niklaus", "Sophie", "Tim", "Anita", "Guido", "Yukihiro"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Hamilton", "Thompson", "Liskov", "Ritchie", "Allen", "Dijkstra",
        "Perlman", "Turing", "Lamarr", "McCarthy", "Johnson", "Wirth", "Wilson", "Berners-Lee", "Borg", "O'Neil",
        "van Rossum"]


def _json(value: object) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _csv(rows: Sequence[Sequence[object]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def csv_sales_summary() -> dict[str, str]:
    rng = random.Random(101)
    regions = ["north", "south", "east", "west", "central"]
    products = ["widget", "gadget", "doohickey", "gizmo"]
    rows: list[list[object]] = [["date", "region", "product", "units", "unit_price"]]
    cents: dict[str, int] = defaultdict(int)
    for i in range(400):
        region, units, price = rng.choice(regions), rng.randint(1, 40), rng.randint(199, 9999)
        rows.append([f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}", region, rng.choice(products), units,
                     f"{price // 100}.{price % 100:02d}"])
        cents[region] += units * price
    ranked = sorted(cents.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = ["region,revenue"] + [f"{r},{c // 100}.{c % 100:02d}" for r, c in ranked]
    return {"environment/sales.csv": _csv(rows), "tests/expected.json": _json({"lines": lines})}


def json_to_csv() -> dict[str, str]:
    rng = random.Random(102)
    users: list[dict[str, Any]] = []
    expected: list[list[str]] = []
    ids = rng.sample(range(100, 999), 60)
    for n, uid in enumerate(ids):
        first, last = FIRST[n % len(FIRST)], LAST[(n * 7) % len(LAST)]
        if n % 9 == 0:
            last += ", Jr."  # a comma inside a field: the CSV must quote it
        if n % 13 == 0:
            first = f'"{first}"'  # a double quote inside a field
        city = rng.choice(["Paris", "Berlin", "Oslo", "Lima", "Kyoto", "Austin, TX"])
        tags = rng.sample(["admin", "beta", "staff", "vip", "trial"], rng.randint(0, 3))
        active = rng.random() < 0.7
        users.append({"id": uid, "name": {"first": first, "last": last},
                      "email": f"user{uid}@example.org", "address": {"city": city, "country": rng.choice(
                          ["FR", "DE", "NO", "PE", "JP", "US"])}, "tags": tags, "active": active})
    for u in sorted(users, key=lambda u: u["id"]):
        expected.append([str(u["id"]), f"{u['name']['first']} {u['name']['last']}", u["email"],
                         u["address"]["city"], u["address"]["country"], ";".join(u["tags"]),
                         "true" if u["active"] else "false"])
    return {"environment/users.json": _json(users), "tests/expected.json": _json({"rows": expected})}


def sqlite_top_customers() -> dict[str, str]:
    rng = random.Random(103)
    sql = ["CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT);",
           "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), "
           "order_date TEXT NOT NULL, status TEXT NOT NULL);",
           "CREATE TABLE order_items (order_id INTEGER REFERENCES orders(id), sku TEXT, quantity INTEGER, "
           "unit_price_cents INTEGER);"]
    names = [f"{f} {la}" for f, la in zip(FIRST, LAST, strict=True)]
    for cid, name in enumerate(names, 1):
        sql.append(f"INSERT INTO customers VALUES ({cid}, '{name.replace(chr(39), chr(39) * 2)}', 'XX');")
    totals: dict[str, int] = defaultdict(int)
    for oid in range(1, 201):
        cid = rng.randint(1, len(names))
        year = rng.choice([2022, 2023, 2023, 2023, 2024])
        date = f"{year}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        status = rng.choice(["paid", "paid", "paid", "refunded", "pending"])
        sql.append(f"INSERT INTO orders VALUES ({oid}, {cid}, '{date}', '{status}');")
        for _ in range(rng.randint(1, 4)):
            qty, price = rng.randint(1, 5), rng.randint(100, 20000)
            sql.append(f"INSERT INTO order_items VALUES ({oid}, 'SKU-{rng.randint(1, 50):03d}', {qty}, {price});")
            if year == 2023 and status == "paid":
                totals[names[cid - 1]] += qty * price
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    expected = [{"name": n, "total": round(c / 100, 2)} for n, c in ranked]
    text = "BEGIN;\n" + "\n".join(sql) + "\nCOMMIT;\n"
    return {"environment/shop.sql": text, "tests/expected.json": _json({"top": expected})}


def jq_user_stats() -> dict[str, str]:
    rng = random.Random(104)
    users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace"]
    lines: list[str] = []
    stats: dict[str, dict[str, Any]] = {}
    second = 0
    for _ in range(500):
        second += rng.randint(1, 90)
        ts = f"2024-05-{1 + second // 86400:02d}T{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"
        user, kind = rng.choice(users), rng.choice(["login", "click", "click", "click", "view", "logout"])
        event = {"ts": ts, "user": user, "type": kind}
        if kind == "click":
            event["target"] = rng.choice(["#buy", "#cart", "#help"])
        lines.append(json.dumps(event, separators=(",", ":")))
        s = stats.setdefault(user, {"events": 0, "clicks": 0, "first_seen": ts, "last_seen": ts})
        s["events"] += 1
        s["clicks"] += kind == "click"
        s["last_seen"] = ts
    return {"environment/events.jsonl": "\n".join(lines) + "\n", "tests/expected.json": _json(stats)}


def sqlite_import_csv() -> dict[str, str]:
    rng = random.Random(105)
    products: list[list[object]] = [["sku", "name", "price_cents"]]
    stock: list[list[object]] = [["sku", "warehouse", "qty"]]
    totals: dict[str, int] = {}
    names: dict[str, str] = {}
    for i in range(1, 41):
        sku = f"P{i:04d}"
        name = rng.choice(["Bolt", "Nut", "Washer", "Screw", "Hinge", "Bracket"]) + f" {rng.randint(2, 24)}mm"
        if i % 11 == 0:
            name += ", zinc"
        products.append([sku, name, rng.randint(5, 5000)])
        names[sku] = name
        totals[sku] = 0
        for wh in rng.sample(["AMS", "BER", "LYS", "OSL"], rng.randint(1, 3)):
            qty = rng.randint(0, 12)
            stock.append([sku, wh, qty])
            totals[sku] += qty
    low = sorted([[s, names[s], q] for s, q in totals.items() if q < 10])
    expected = {"products": products[1:], "stock": stock[1:], "low_stock": low}
    return {"environment/data/products.csv": _csv(products), "environment/data/stock.csv": _csv(stock),
            "tests/expected.json": _json(expected)}


def pivot_readings() -> dict[str, str]:
    rng = random.Random(106)
    sensors = ["temp_kitchen", "temp_attic", "humidity_cellar", "co2_office", "temp_garage"]
    rows: list[list[object]] = [["timestamp", "sensor", "value"]]
    table: dict[str, dict[str, str]] = defaultdict(dict)
    records: list[list[object]] = []
    for hour in range(48):
        ts = f"2024-02-{1 + hour // 24:02d}T{hour % 24:02d}:00"
        for s in sensors:
            if rng.random() < 0.8:
                value = f"{rng.uniform(0, 900 if s.startswith('co2') else 40):.1f}"
                records.append([ts, s, value])
                table[ts][s] = value
    rng.shuffle(records)
    rows += records
    header = ["timestamp", *sorted(sensors)]
    wide: list[list[str]] = [header] + [[ts, *(table[ts].get(s, "") for s in sorted(sensors))] for ts in sorted(table)]
    return {"environment/readings.csv": _csv(rows), "tests/expected.json": _json({"rows": wide})}


def csv_clean_join() -> dict[str, str]:
    rng = random.Random(107)
    depts = [["code", "name"], ["ENG", "Engineering"], ["OPS", "Operations"], ["FIN", "Finance"],
             ["MKT", "Marketing"], ["HR", "People"]]
    emp: list[list[object]] = [["id", "name", "dept_code", "salary"]]
    seen: dict[int, tuple[str, int]] = {}
    for i in range(1, 91):
        code = rng.choice(["ENG", "ENG", "OPS", "FIN", "MKT", "HR", "LEGAL"])
        salary = rng.randint(300, 1500) * 100
        seen[i] = (code, salary)
        shown_code = rng.choice([code, code.lower(), f" {code} ", code.title()])
        shown_salary = rng.choice([str(salary), f"{salary:,}", f"${salary}", f" {salary} "])
        emp.append([i, f" {FIRST[i % 20]} {LAST[(i * 3) % 20]} ", shown_code, shown_salary])
        if i % 8 == 0:  # an exact duplicate row, as an export run twice leaves them
            emp.append(emp[-1])
    names = dict(depts[1:])
    groups: dict[str, list[int]] = defaultdict(list)
    for code, salary in seen.values():
        groups[names.get(code, "UNASSIGNED")].append(salary)
    lines = ["department,headcount,avg_salary"]
    for dept in sorted(groups):
        total, count = sum(groups[dept]), len(groups[dept])
        avg = (2 * total + count) // (2 * count)  # round half up, in integers
        lines.append(f"{dept},{count},{avg}")
    return {"environment/employees.csv": _csv(emp), "environment/departments.csv": _csv(depts),
            "tests/expected.json": _json({"lines": lines})}


DATA: dict[str, Callable[[], dict[str, str]]] = {
    "csv-sales-summary": csv_sales_summary, "json-to-csv": json_to_csv,
    "sqlite-top-customers": sqlite_top_customers, "jq-user-stats": jq_user_stats,
    "sqlite-import-csv": sqlite_import_csv, "pivot-readings": pivot_readings, "csv-clean-join": csv_clean_join,
}
