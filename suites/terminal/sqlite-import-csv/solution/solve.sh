#!/usr/bin/env bash
# Oracle: declare the tables first so .import converts numbers by column affinity, and skip headers.
set -euo pipefail
rm -f /app/inventory.db
sqlite3 /app/inventory.db <<'SQL'
CREATE TABLE products (sku TEXT PRIMARY KEY, name TEXT NOT NULL, price_cents INTEGER NOT NULL);
CREATE TABLE stock (sku TEXT NOT NULL REFERENCES products(sku), warehouse TEXT NOT NULL,
                    qty INTEGER NOT NULL, PRIMARY KEY (sku, warehouse));
.mode csv
.import --skip 1 /app/data/products.csv products
.import --skip 1 /app/data/stock.csv stock
CREATE VIEW low_stock AS
  SELECT p.sku, p.name, SUM(s.qty) AS total_qty FROM products p JOIN stock s ON s.sku = p.sku
  GROUP BY p.sku HAVING SUM(s.qty) < 10;
SQL
