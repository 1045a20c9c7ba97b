"""Fixtures for the security tests: the LLM judge's real fake-OpenAI server and judge factory
(reused from the LLM judge tests, not redefined)."""

from tests.scorer.llm.conftest import make_judge, server  # noqa: F401 (pytest fixtures)
