"""python3 -m shop CART.json [CODE]: prints the cart's total in cents."""

import json
import sys

from . import checkout

print(checkout(json.load(open(sys.argv[1])), sys.argv[2] if len(sys.argv) > 2 else None))
