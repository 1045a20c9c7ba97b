"""Shared fixtures: each infrastructure module registers itself here."""

pytest_plugins: list[str] = ["tests.infra_chdb", "tests.infra_kafka"]
