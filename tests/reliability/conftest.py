"""Fixtures of the fault tests, reused from the scorer-service, collector and LLM-judge suites
(not redefined): per-test topics and settings on a module broker, a chDB score writer,
collectors, the real fake-OpenAI server and judge factory."""

from tests.collector.conftest import make_collector  # noqa: F401 (pytest fixture)
from tests.scorer.llm.conftest import make_judge, server  # noqa: F401 (pytest fixtures)
from tests.scorer.pipeline.conftest import (  # noqa: F401 (pytest fixtures)
    make_settings,
    topic,
    writer,
)
