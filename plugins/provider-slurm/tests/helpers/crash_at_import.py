"""An env module that fails at import: its server exits during start-up."""

raise RuntimeError("boom: this env cannot be imported")
