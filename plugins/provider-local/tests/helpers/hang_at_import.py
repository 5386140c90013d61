"""An env module whose import never finishes (until killed)."""

import time

while True:
    time.sleep(0.1)
