"""Local providers: env servers as child processes (local) or in isolated uv environments (uv)."""
