"""Fixtures of the fault tests, reused from the scorer-service and collector suites (not
redefined): per-test topics and settings on a module broker, a chDB score writer, collectors."""

from tests.collector.conftest import make_collector  # noqa: F401 (pytest fixture)
from tests.scorer.pipeline.conftest import (  # noqa: F401 (pytest fixtures)
    make_settings,
    topic,
    writer,
)
