"""Verifier of py-import-cycle: every import order works in a fresh interpreter, and the API
gives the same results as before."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
sys.path.append("/app/shop")
{first}
import shop, shop.models, shop.pricing, shop.discounts
from shop.models import Item, Cart
assert shop.Item is Item and shop.Cart is Cart
try:
    shop.pricing.price_of("nail", 1)
except TypeError:
    pass
else:
    raise AssertionError("price_of accepted a non-Item")
cart = Cart()
cart.add(Item("nail", 5, "hardware"), 100)
cart.add(Item("pad", 250, "paper"), 2)
cart.add(Item("glue", 399), 1)
assert cart.subtotal_cents() == 425 + 500 + 399, cart.subtotal_cents()
assert shop.discounts.apply(cart, "SPRING10") == 1192, shop.discounts.apply(cart, "SPRING10")
assert shop.discounts.apply(cart, None) == 1324
lines = [{{"sku": "pad", "unit_cents": 250, "category": "paper", "qty": 5}}]
assert shop.checkout(lines) == 1125 and shop.checkout(lines, "WELCOME5") == 625
assert shop.pricing.BULK["hardware"] == (10, 15) and set(shop.discounts.CODES) == {{"WELCOME5", "SPRING10"}}
print("fine")
"""
FIRSTS = ["import shop", "import shop.pricing", "import shop.discounts", "from shop.models import Item",
          "import shop.checkout", "from shop.pricing import price_of"]


def python(code: str) -> subprocess.CompletedProcess[str]:
    # -I: no PYTHON* variables or user site; -B: no bytecode written into /app
    return subprocess.run([sys.executable, "-I", "-B", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd="/tmp")


for first in FIRSTS:
    run = python(CHECK.format(first=first))
    if run.returncode or run.stdout.strip() != "fine":
        sys.exit(f"FAIL: with {first!r} first:\n{run.stderr[-2000:]}")
cli = python("import runpy, sys; sys.path.append('/app/shop'); sys.argv = ['shop', '/tests/cart.json', 'WELCOME5'];"
             " runpy.run_module('shop', run_name='__main__')")
if cli.returncode or cli.stdout.strip() != "4060":
    sys.exit(f"FAIL: python3 -m shop printed {cli.stdout.strip()!r} (expected 4060):\n{cli.stderr[-2000:]}")
print("ok")
