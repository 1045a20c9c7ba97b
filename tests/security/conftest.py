"""Fixtures for the security tests, reused from the judges' own test suites (not redefined): the
LLM judge's real fake-OpenAI server and judge factory, and the local judge over the real USE model."""

from tests.collector.conftest import make_collector  # noqa: F401 (pytest fixture)
from tests.scorer.llm.conftest import make_judge, server  # noqa: F401 (pytest fixtures)
from tests.scorer.local.conftest import (  # noqa: F401 (pytest fixtures)
    local_judge,
    support_detector,
    use_embedder,
)
from tests.scorer.pipeline.conftest import (  # noqa: F401 (pytest fixtures)
    make_settings,
    topic,
    writer,
)
