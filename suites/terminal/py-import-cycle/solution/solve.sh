#!/usr/bin/env bash
# Oracle: models needs price_of only when a subtotal is computed, so import it there, not at the top.
set -euo pipefail
cd /app/shop
python3 - <<'PY'
path = "shop/models.py"
src = open(path).read()
src = src.replace("\nfrom .pricing import price_of\n", "")
src = src.replace('        """Sum of each line\'s price (see pricing.price_of)."""\n',
                  '        """Sum of each line\'s price (see pricing.price_of)."""\n'
                  "        # imported here: pricing imports this module for Item (a top-level import is a cycle)\n"
                  "        from .pricing import price_of\n\n")
open(path, "w").write(src)
PY
python3 -m shop cart.json
