"""Grid world: a small deterministic grid with walls, a goal and a step limit."""
