"""Real implementations of external services for tests (servers on loopback, not mocks)."""
