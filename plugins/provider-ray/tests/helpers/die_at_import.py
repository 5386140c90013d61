"""An env module whose import kills the whole worker process (as a segfault in an extension would)."""

import os

os._exit(7)
