"""``python -m bench``: see ``bench.cli``."""

from __future__ import annotations

import sys

from bench.cli import main

sys.exit(main())
