"""OpenLLMetry (Traceloop), the readers its declaration (:data:`ragpulse.common.CONVENTIONS`)
cannot express: vector-DB retriever spans by name, the LlamaIndex retriever and synthesizer
tasks, and the legacy flattened ``gen_ai.prompt.<i>``/``gen_ai.completion.<i>`` messages of
instrumentors not yet migrated to the GenAI JSON messages (after the migration OpenLLMetry
writes :mod:`.genai`'s attributes).

Readers only: :mod:`.sources` puts them in precedence order. Pure and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..span import AttrValue, Span
from .families import Families, indexed
from .messages import Message, content_text, role_of
from .prompt import contexts_from_variables
from .readers import doc_texts, is_node_json
from .values import as_text, structured


def _flat_messages(
    attrs: Mapping[str, AttrValue], prefix: str, default_role: str, fams: dict[str, list[str]] | None = None
) -> list[Message]:
    """OpenLLMetry legacy ``gen_ai.prompt.<i>.role|content``."""
    out: list[Message] = []
    for m in indexed(attrs, prefix, fams):
        t = content_text(m.get("content")) if isinstance(m.get("content"), str) else None
        if t is not None:
            out.append((role_of(m.get("role"), default_role), t))
    return out


def legacy_prompt_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _flat_messages(attrs, "gen_ai.prompt.", "user", fams)


def legacy_completion_messages(attrs: Mapping[str, AttrValue], fams: Families) -> list[Message]:
    return _flat_messages(attrs, "gen_ai.completion.", "assistant", fams)


def is_vector_db_span(span: Span) -> bool:
    """OpenLLMetry's vector-DB instrumentations name their query spans ``vector_db_retrieve...``."""
    return span.name.startswith("vector_db_retrieve")


def is_retriever_task(span: Span) -> bool:
    """OpenLLMetry's LlamaIndex retrievers: a task span whose output is a list of nodes, no
    operation name."""
    a = span.attributes
    return a.get("traceloop.span.kind") == "task" and _is_node_list(a.get("traceloop.entity.output"))


def _is_node_list(v: AttrValue) -> bool:
    """Whether a JSON text is a list of LlamaIndex ``NodeWithScore`` objects (as dicts or as
    JSON-encoded strings). A cheap look at its head: any task's output passes through here."""
    if not isinstance(v, str):
        return False
    head = v[:32].lstrip()
    return head[:1] == "[" and '"node' in head


_SYNTHESIS_MARKERS = ('"nodes"', '"text_chunks"', '"context_str"')


def synthesis_contexts(span: Span) -> list[str]:
    """The retrieved texts a LlamaIndex response synthesizer was given, from its OpenLLMetry
    task span's ``traceloop.entity.input``: ``nodes`` (``CompactAndRefine.synthesize``),
    ``text_chunks`` (``get_response``) or ``{"kwds": {"context_str": ...}}``
    (``DefaultRefineProgram``). ``[]`` when the span is none of these."""
    v = span.attributes.get("traceloop.entity.input")
    if not isinstance(v, str) or not any(m in v for m in _SYNTHESIS_MARKERS):
        return []
    parsed = structured(v)
    if not isinstance(parsed, dict):
        return []
    for scope in (parsed, parsed.get("kwargs"), parsed.get("kwds")):
        if not isinstance(scope, dict):
            continue
        nodes = scope.get("nodes")
        if isinstance(nodes, list) and all(  # NodeWithScore only: a splitter's nodes are not
            isinstance(n, dict) and "node" in n or isinstance(n, str) and is_node_json(n)
            for n in nodes
        ) and (docs := doc_texts(nodes)):
            return docs
        chunks = scope.get("text_chunks")
        if isinstance(chunks, list) and (docs := [c for c in chunks if as_text(c)]):
            return docs
        if docs := contexts_from_variables({"context_str": scope.get("context_str")}):
            return docs
    return []
