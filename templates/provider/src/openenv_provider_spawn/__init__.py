"""A minimal provider: env servers as child processes of this Python."""
