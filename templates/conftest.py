"""Lets ``pytest templates/<kind>/tests`` run from a checkout without installing the template:
each template's ``src`` goes on ``sys.path``. (A copied template is installed instead:
``pip install -e ".[test]"``; this file is not part of any template.)"""

from __future__ import annotations

import sys
from pathlib import Path

for _src in sorted(Path(__file__).parent.glob("*/src")):
    if str(_src) not in sys.path:
        sys.path.insert(0, str(_src))
