"""The source tables: for each field the extractor fills, its sources in precedence order, as
(name, convention, reader) rows. :mod:`.trace` walks them and the first row that yields a value
wins. The rows of declared fields and span kinds come from the convention declarations
(:data:`ragpulse.common.CONVENTIONS`, in their order); the rows below them name the readers of
a convention's reader module. docs/instrumentation.md §5 shows :func:`source_matrix` of these
tables, and ``tests/scorer/traces/test_source_tables.py`` keeps the two equal.

``name`` is what ``TraceFacts.sources`` records for a hit (the question, contexts and answer
rows) and what the docs show; the row-metadata tables are attribute keys read on the final LLM
span first (see :mod:`.facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ragpulse.common import CONVENTIONS, SpanKind

from ..span import Span
from . import events, genai, openinference, openllmetry
from .readers import (
    answer_at,
    context_list_at,
    documents_at,
    entity_input_query,
    entity_input_question,
    question_at,
    root_question_at,
)
from .values import as_model_name, as_text, as_token_count, as_version

_NAMES = {c.id: c.name for c in CONVENTIONS}
OPENINFERENCE = _NAMES["openinference"]
GENAI = _NAMES["gen_ai"]
GENAI_LEGACY = f"{GENAI} pre-1.37"
OPENLLMETRY = _NAMES["openllmetry"]
OPENLLMETRY_LEGACY = f"{OPENLLMETRY} legacy"
VECTOR_DB = _NAMES["db.query.result"]


@dataclass(frozen=True, slots=True)
class Source:
    """One place a field can come from: ``read``'s signature is the table's (see each table)."""

    name: str
    convention: str
    read: Callable[..., Any]


@dataclass(frozen=True, slots=True)
class EventSource:
    """One span event that can carry an LLM call's messages. ``read`` returns the messages, or
    ``None`` when the event lacks the attribute. ``append`` events hold one message each and
    add up; the others hold a whole list, and a later one replaces an earlier one."""

    event: str
    side: Literal["input", "output", "system"]
    name: str
    convention: str
    read: events.EventReader
    append: bool = False


# -- question ------------------------------------------------------------------------------------

def _declared(field: str, readers: dict[str, Callable[[str], Any]], prefix: str = "",
              by_form: bool = False) -> tuple[Source, ...]:
    """The rows of one declared field (:class:`ragpulse.common.Read`) of every convention, each
    read by the reader its form names: in declaration order, or with ``by_form`` the forms in
    the order of ``readers`` first."""
    reads = [(c.name, r) for c in CONVENTIONS for r in getattr(c, field)]
    if by_form:
        reads.sort(key=lambda cr: list(readers).index(cr[1].form))
    return tuple(Source(prefix + r.key, name, readers[r.form](r.key)) for name, r in reads)


ROOT_QUESTION = _declared("root_input", {"text": root_question_at, "call": entity_input_question},
                          "root:")
"""The question the root span records as its input. ``read(attributes) -> str | None``."""

RETRIEVAL_QUERY = _declared("query", {"text": question_at, "call": entity_input_query},
                            by_form=True)
"""The query a retriever (else a reranker) was asked, when the root records no question: the
plain values first, then the function-call records. ``read(attributes) -> str | None``."""

# -- contexts ------------------------------------------------------------------------------------

def _is_kind(kind: SpanKind) -> Callable[[Span], bool]:
    """:meth:`SpanKind.matches` on a span, inlined: it runs for every span of every trace."""
    key, values = kind.key, kind.values
    if not values:
        return lambda span: span.attributes.get(key) is not None
    return lambda span: (v := span.attributes.get(key)).__class__ is str and v in values


RETRIEVAL_SPAN: tuple[Source, ...] = (
    *(Source(str(k), c.name, _is_kind(k)) for c in CONVENTIONS for k in c.retriever),
    Source("gen_ai.operation.name = execute_tool on a datastore tool", GENAI,
           genai.is_datastore_tool),
    Source("span name vector_db_retrieve*", OPENLLMETRY, openllmetry.is_vector_db_span),
    Source("task span with a LlamaIndex node list output", OPENLLMETRY,
           openllmetry.is_retriever_task),
    Source("db.query.result / db.search.result events", VECTOR_DB, events.has_result_events),
)
"""What makes a span a retrieval span (any row): the declared kinds, then the readers'.
``read(span) -> bool``. Rerankers (:data:`RERANKER_KINDS`) are handled apart: their output
replaces the retrievals they reranked."""

RETRIEVAL_DOCUMENTS: tuple[Source, ...] = (
    Source("retrieval.documents", OPENINFERENCE, openinference.retrieval_documents),
    *_declared("documents", {"documents": documents_at, "contexts": context_list_at}),
    Source("event:db.query.result", VECTOR_DB, events.result_documents),
    Source("gen_ai.tool.call.result", GENAI, genai.tool_result_documents),
)
"""The documents of one retrieval span, in rank order. ``read(span, families) -> list[str]``."""

LLM_KINDS: tuple[SpanKind, ...] = tuple(k for c in CONVENTIONS for k in c.llm)
"""What makes a span an LLM call even without messages."""
RERANKER_KINDS: tuple[SpanKind, ...] = tuple(k for c in CONVENTIONS for k in c.reranker)
MESSAGE_FAMILIES = frozenset(f for c in CONVENTIONS for f in c.messages)
"""Attribute families (first two dotted components) that can hold an LLM call's messages: the
message readers below run only on spans with one of them, an LLM kind, or span events."""

# -- the LLM call's messages ---------------------------------------------------------------------

LLM_INPUT: tuple[Source, ...] = (
    Source("llm.input_messages", OPENINFERENCE, openinference.input_messages),
    Source("gen_ai.input.messages", GENAI, genai.input_messages),
    Source("gen_ai.prompt.<i>", OPENLLMETRY_LEGACY, openllmetry.legacy_prompt_messages),
    Source("gen_ai.prompt", GENAI_LEGACY, genai.legacy_prompt),
    Source("llm.prompts", OPENINFERENCE, openinference.legacy_prompts),
    Source("llm.prompts", OPENINFERENCE, openinference.legacy_prompts_array),
)
"""An LLM span's input messages, ordered by how current the convention is.
``read(attributes, families) -> list[Message]``; an empty list is a miss."""

LLM_SYSTEM: tuple[Source, ...] = (
    Source("gen_ai.system_instructions", GENAI, genai.system_instructions),
)
"""System instructions kept apart from the input messages, put first when the input has no
system message. ``read(attributes, families) -> list[Message]``."""

LLM_OUTPUT: tuple[Source, ...] = (
    Source("llm.output_messages", OPENINFERENCE, openinference.output_messages),
    Source("gen_ai.output.messages", GENAI, genai.output_messages),
    Source("gen_ai.completion.<i>", OPENLLMETRY_LEGACY, openllmetry.legacy_completion_messages),
    Source("gen_ai.completion", GENAI_LEGACY, genai.legacy_completion),
    Source("llm.choices", OPENINFERENCE, openinference.legacy_choices),
)
"""An LLM span's output messages. ``read(attributes, families) -> list[Message]``."""

_DETAILS = "gen_ai.client.inference.operation.details"
LLM_EVENTS: tuple[EventSource, ...] = (
    EventSource(_DETAILS, "input", f"event:{_DETAILS}", GENAI,
                events.messages_in("gen_ai.input.messages", "user")),
    EventSource(_DETAILS, "output", f"event:{_DETAILS}", GENAI,
                events.messages_in("gen_ai.output.messages", "assistant")),
    EventSource(_DETAILS, "system", f"event:{_DETAILS}", GENAI,
                events.messages_in("gen_ai.system_instructions", "system")),
    *(
        EventSource(name, "input", "event:gen_ai.<role>.message", GENAI_LEGACY,
                    events.one_message(role), append=True)
        for name, role in events.LEGACY_INPUT_EVENTS.items()
    ),
    EventSource("gen_ai.choice", "output", "event:gen_ai.choice", GENAI_LEGACY,
                events.one_message("assistant", role_attribute=False), append=True),
    EventSource("gen_ai.content.prompt", "input", "event:gen_ai.content.prompt", GENAI_LEGACY,
                events.messages_in("gen_ai.prompt", "user")),
    EventSource("gen_ai.content.completion", "output", "event:gen_ai.content.completion",
                GENAI_LEGACY, events.messages_in("gen_ai.completion", "assistant")),
)
"""Span events read for the side(s) the span's attributes left empty, in event order."""

# -- answer --------------------------------------------------------------------------------------

ROOT_ANSWER = _declared("root_output", {"text": answer_at}, "root:")
"""The answer the root span records as its output (else the final LLM call's last assistant
message, from :data:`LLM_OUTPUT`). ``read(attributes) -> str | None``."""

# -- row metadata: attribute keys, each table read with one converter ------------------------------

MODEL: tuple[Source, ...] = (
    Source("llm.model_name", OPENINFERENCE, as_model_name),
    Source("gen_ai.request.model", GENAI, as_model_name),
    Source("gen_ai.response.model", GENAI, as_model_name),
    Source("llm.request.model_name", OPENLLMETRY_LEGACY, as_model_name),
    Source("llm.response.model_name", OPENLLMETRY_LEGACY, as_model_name),
)
PROVIDER: tuple[Source, ...] = (
    Source("llm.provider", OPENINFERENCE, as_model_name),
    Source("traceloop.association.properties.ls_provider", OPENLLMETRY, as_model_name),
    Source("gen_ai.provider.name", GENAI, as_model_name),
    Source("gen_ai.system", GENAI_LEGACY, as_model_name),
    Source("llm.system", OPENINFERENCE, as_model_name),
)
"""The model's provider, when no span names the model (LangChain's own name: ``ls_provider``)."""
PROMPT_VERSION: tuple[Source, ...] = (
    Source("ragpulse.prompt.version", "ragpulse", as_version),
    Source("llm.prompt_template.version", OPENINFERENCE, as_version),
    Source("traceloop.prompt.version", OPENLLMETRY, as_version),
    Source("traceloop.entity.version", OPENLLMETRY, as_version),
)
RETRIEVER_VERSION: tuple[Source, ...] = (
    Source("ragpulse.retriever.version", "ragpulse", as_version),
    Source("retriever.version", "ragpulse", as_version),
)
SESSION: tuple[Source, ...] = (
    Source("session.id", OPENINFERENCE, as_text),
    Source("gen_ai.conversation.id", GENAI, as_text),
)
USER: tuple[Source, ...] = (
    Source("user.id", OPENINFERENCE, as_text),
    Source("enduser.id", "OTel", as_text),
)
PROMPT_TOKENS: tuple[Source, ...] = (
    Source("llm.token_count.prompt", OPENINFERENCE, as_token_count),
    Source("gen_ai.usage.input_tokens", GENAI, as_token_count),
    Source("gen_ai.usage.prompt_tokens", GENAI_LEGACY, as_token_count),
)
COMPLETION_TOKENS: tuple[Source, ...] = (
    Source("llm.token_count.completion", OPENINFERENCE, as_token_count),
    Source("gen_ai.usage.output_tokens", GENAI, as_token_count),
    Source("gen_ai.usage.completion_tokens", GENAI_LEGACY, as_token_count),
)


def keys(table: tuple[Source, ...]) -> tuple[str, ...]:
    """The attribute keys of a row-metadata table, in order."""
    return tuple(s.name for s in table)


TABLES: dict[str, tuple[Source, ...] | tuple[EventSource, ...]] = {
    "question (root span)": ROOT_QUESTION,
    "question (retriever, then reranker)": RETRIEVAL_QUERY,
    "retrieval span": RETRIEVAL_SPAN,
    "contexts (per retrieval span)": RETRIEVAL_DOCUMENTS,
    "LLM input messages": LLM_INPUT,
    "LLM system instructions": LLM_SYSTEM,
    "LLM output messages": LLM_OUTPUT,
    "LLM messages from span events": LLM_EVENTS,
    "answer (root span)": ROOT_ANSWER,
    "model": MODEL,
    "provider": PROVIDER,
    "prompt_version": PROMPT_VERSION,
    "retriever_version": RETRIEVER_VERSION,
    "session_id": SESSION,
    "user_id": USER,
    "prompt_tokens": PROMPT_TOKENS,
    "completion_tokens": COMPLETION_TOKENS,
}
"""Every table, by the field it fills, in the order :func:`source_matrix` shows them."""


def source_matrix() -> str:
    """The tables as one markdown table (docs/instrumentation.md §5 holds this text)."""
    lines = ["| field | # | source | convention |", "|---|---|---|---|"]
    for field, table in TABLES.items():
        for i, row in enumerate(table, 1):
            if isinstance(row, EventSource):
                name = f"`{row.event}` event ({row.side})"
            else:
                name = f"`{row.name}`"
            lines.append(f"| {field if i == 1 else ''} | {i} | {name} | {row.convention} |")
    return "\n".join(lines) + "\n"
