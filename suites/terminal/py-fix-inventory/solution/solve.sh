#!/usr/bin/env bash
# Oracle: three comparisons and a silent default disagree with the docstrings.
set -euo pipefail
cd /app/inventory
python3 - <<'PY'
path = "inventory/core.py"
src = open(path).read()
src = src.replace("        if qty >= have:\n", "        if qty > have:\n")
src = src.replace("        self._stock[sku] = have - qty\n",
                  "        if qty == have:\n            del self._stock[sku]\n        else:\n            self._stock[sku] = have - qty\n")
src = src.replace("if q <= threshold)", "if q < threshold)")
src = src.replace("q * prices.get(s, 0)", "q * prices[s]")
open(path, "w").write(src)
PY
python3 -m unittest discover -q tests
