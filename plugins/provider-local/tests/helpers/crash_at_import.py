"""An env module that raises while being imported."""

raise RuntimeError("crash_at_import: this env module fails on purpose")
