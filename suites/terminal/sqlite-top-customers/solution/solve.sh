#!/usr/bin/env bash
# Oracle: one SQL query, JSON straight from sqlite3's json mode.
set -euo pipefail
sqlite3 -json /app/shop.db "
  SELECT c.name AS name, SUM(i.quantity * i.unit_price_cents) / 100.0 AS total
  FROM customers c JOIN orders o ON o.customer_id = c.id JOIN order_items i ON i.order_id = o.id
  WHERE o.status = 'paid' AND o.order_date BETWEEN '2023-01-01' AND '2023-12-31'
  GROUP BY c.id ORDER BY SUM(i.quantity * i.unit_price_cents) DESC, c.name LIMIT 5" > /app/top_customers.json
