"""Two cheap dialects: TruLens (``ai.observability.*``) and Confident AI / deepeval
(``confident.*``): root input/output, retrieval spans and their contexts.

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from ..span import Span


def is_trulens_retrieval(span: Span) -> bool:
    return span.attributes.get("ai.observability.span_type") == "retrieval"


def is_confident_retrieval(span: Span) -> bool:
    return "confident.span.retrieval_context" in span.attributes
