"""OpenEnv HTTP transport with real sessions, plus upstream's legacy stateless routes."""
