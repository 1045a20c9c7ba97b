"""From OTLP bytes to scorable samples: decode spans, extract (question, contexts, answer) and row
metadata from one trace, and decide deterministically which traces get judged.

The instrumentation helper for apps without a framework lives in
:mod:`ragpulse.scorer.traces.instrument`
(``from ragpulse.scorer.traces.instrument import RagTracer``);
it is not imported here so the scorer does not pay for it.
"""

from .decode import DecodeError, DecodeLimits, SpanDecoder, group_by_trace
from .extract import Extraction, ExtractionSettings, TraceMeta, extract, split_prompt
from .sampling import AttributeRule, Sampler, SamplingDecision, SamplingSettings, hash_fraction
from .span import Attributes, AttrValue, Span, SpanEvent, SpanKind, StatusCode

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
    "TraceMeta",
    "extract",
    "group_by_trace",
    "hash_fraction",
    "split_prompt",
]
