"""Echo environment: echoes a message back, reward 0.1 per character."""
