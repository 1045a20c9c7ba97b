"""From OTLP bytes to scorable samples: decode spans, extract (question, contexts, answer) and row
metadata from one trace, and decide deterministically which traces get judged.

The null-row reasons extraction produces (``NOT_RAG``, ...) and their advice live in
:mod:`ragpulse.common.schema`, which the dashboards read them from.
"""

from .extract import Extraction, ExtractionSettings, TraceFacts, extract, split_prompt
from .sampling import AttributeRule, Sampler, SamplingDecision, SamplingSettings, hash_fraction
from .span import Attributes, AttrValue, Span, SpanEvent, SpanKind, StatusCode
from .span_decoder import DecodeError, DecodeLimits, SpanDecoder, group_by_trace

__all__ = [
    "AttrValue",
    "AttributeRule",
    "Attributes",
    "DecodeError",
    "DecodeLimits",
    "Extraction",
    "ExtractionSettings",
    "Sampler",
    "SamplingDecision",
    "SamplingSettings",
    "Span",
    "SpanDecoder",
    "SpanEvent",
    "SpanKind",
    "StatusCode",
    "TraceFacts",
    "extract",
    "group_by_trace",
    "hash_fraction",
    "split_prompt",
]
