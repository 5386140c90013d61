"""An env module that raises while being imported."""

raise RuntimeError("raise_at_import: this env module fails on purpose")
