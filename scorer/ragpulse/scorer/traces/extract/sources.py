"""The source tables: for each field the extractor fills, its sources in precedence order, as
(name, convention, reader) rows. :mod:`.trace` walks them and the first row that yields a value
wins; adding a convention is adding its readers (one module per convention family) and rows
here. docs/instrumentation.md §5 shows :func:`source_matrix` of these tables, and
``tests/scorer/traces/test_source_tables.py`` keeps the two equal.

``name`` is what ``TraceFacts.sources`` records for a hit (the question, contexts and answer
rows) and what the docs show; the row-metadata tables are attribute keys read on the final LLM
span first (see :mod:`.facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from . import dialects, events, genai, openinference, openllmetry
from .values import (
    _model_name,
    _text,
    _token_count,
    _version,
    answer_at,
    context_list_at,
    documents_at,
    entity_input_query,
    entity_input_question,
    question_at,
)

OPENINFERENCE = "OpenInference"
GENAI = "OTel GenAI"
GENAI_LEGACY = "OTel GenAI pre-1.37"
OPENLLMETRY = "OpenLLMetry"
OPENLLMETRY_LEGACY = "OpenLLMetry legacy"
VECTOR_DB = "vector-DB events"
TRULENS = "TruLens"
CONFIDENT = "Confident AI"


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

ROOT_QUESTION: tuple[Source, ...] = (
    Source("root:input.value", OPENINFERENCE, openinference.input_question),
    Source("root:traceloop.entity.input", OPENLLMETRY, entity_input_question("traceloop.entity.input")),
    Source("root:gen_ai.task.input", GENAI, entity_input_question("gen_ai.task.input")),
    Source("root:ai.observability.record_root.input", TRULENS,
           question_at("ai.observability.record_root.input")),
    Source("root:confident.trace.input", CONFIDENT, question_at("confident.trace.input")),
)
"""The question the root span records as its input. ``read(attributes) -> str | None``."""

RETRIEVAL_QUERY: tuple[Source, ...] = (
    Source("input.value", OPENINFERENCE, question_at("input.value")),
    Source("gen_ai.retrieval.query.text", GENAI, question_at("gen_ai.retrieval.query.text")),
    Source("reranker.query", OPENINFERENCE, question_at("reranker.query")),
    Source("ai.observability.retrieval.query_text", TRULENS,
           question_at("ai.observability.retrieval.query_text")),
    Source("traceloop.entity.input", OPENLLMETRY, entity_input_query("traceloop.entity.input")),
    Source("gen_ai.task.input", GENAI, entity_input_query("gen_ai.task.input")),
)
"""The query a retriever (else a reranker) was asked, when the root records no question.
``read(attributes) -> str | None``."""

# -- contexts ------------------------------------------------------------------------------------

RETRIEVAL_SPAN: tuple[Source, ...] = (
    Source("openinference.span.kind = RETRIEVER", OPENINFERENCE, openinference.is_retriever),
    Source("gen_ai.operation.name = retrieval, vector_db_retrieve, retrieve", GENAI,
           genai.is_retrieval_operation),
    Source("span name vector_db_retrieve*", OPENLLMETRY, openllmetry.is_vector_db_span),
    Source("ai.observability.span_type = retrieval", TRULENS, dialects.is_trulens_retrieval),
    Source("gen_ai.operation.name = execute_tool on a datastore tool", GENAI,
           genai.is_datastore_tool),
    Source("confident.span.retrieval_context", CONFIDENT, dialects.is_confident_retrieval),
    Source("gen_ai.retrieval.documents", GENAI, genai.has_retrieval_documents),
    Source("task span with a LlamaIndex node list output", OPENLLMETRY,
           openllmetry.is_retriever_task),
    Source("db.query.result / db.search.result events", VECTOR_DB, events.has_result_events),
)
"""What makes a span a retrieval span (any row). ``read(span) -> bool``. OpenInference
RERANKER spans are handled apart: their output replaces the retrievals they reranked."""

RETRIEVAL_DOCUMENTS: tuple[Source, ...] = (
    Source("retrieval.documents", OPENINFERENCE, openinference.retrieval_documents),
    Source("gen_ai.retrieval.documents", GENAI, documents_at("gen_ai.retrieval.documents")),
    Source("traceloop.entity.output", OPENLLMETRY, documents_at("traceloop.entity.output")),
    Source("gen_ai.task.output", GENAI, documents_at("gen_ai.task.output")),
    Source("event:db.query.result", VECTOR_DB, events.result_documents),
    Source("ai.observability.retrieval.retrieved_contexts", TRULENS,
           context_list_at("ai.observability.retrieval.retrieved_contexts")),
    Source("confident.span.retrieval_context", CONFIDENT,
           context_list_at("confident.span.retrieval_context")),
    Source("gen_ai.tool.call.result", GENAI, genai.tool_result_documents),
)
"""The documents of one retrieval span, in rank order. ``read(span, families) -> list[str]``."""

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
        for name, role in events._LEGACY_INPUT_EVENTS.items()
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

ROOT_ANSWER: tuple[Source, ...] = (
    Source("root:output.value", OPENINFERENCE, answer_at("output.value")),
    Source("root:traceloop.entity.output", OPENLLMETRY, answer_at("traceloop.entity.output")),
    Source("root:gen_ai.task.output", GENAI, answer_at("gen_ai.task.output")),
    Source("root:ai.observability.record_root.output", TRULENS,
           answer_at("ai.observability.record_root.output")),
    Source("root:confident.trace.output", CONFIDENT, answer_at("confident.trace.output")),
)
"""The answer the root span records as its output (else the final LLM call's last assistant
message, from :data:`LLM_OUTPUT`). ``read(attributes) -> str | None``."""

# -- row metadata: attribute keys, each table read with one converter ------------------------------

MODEL: tuple[Source, ...] = (
    Source("llm.model_name", OPENINFERENCE, _model_name),
    Source("gen_ai.request.model", GENAI, _model_name),
    Source("gen_ai.response.model", GENAI, _model_name),
    Source("llm.request.model_name", OPENLLMETRY_LEGACY, _model_name),
    Source("llm.response.model_name", OPENLLMETRY_LEGACY, _model_name),
)
PROVIDER: tuple[Source, ...] = (
    Source("llm.provider", OPENINFERENCE, _model_name),
    Source("traceloop.association.properties.ls_provider", OPENLLMETRY, _model_name),
    Source("gen_ai.provider.name", GENAI, _model_name),
    Source("gen_ai.system", GENAI_LEGACY, _model_name),
    Source("llm.system", OPENINFERENCE, _model_name),
)
"""The model's provider, when no span names the model (LangChain's own name: ``ls_provider``)."""
PROMPT_VERSION: tuple[Source, ...] = (
    Source("ragpulse.prompt.version", "ragpulse", _version),
    Source("llm.prompt_template.version", OPENINFERENCE, _version),
    Source("traceloop.prompt.version", OPENLLMETRY, _version),
    Source("traceloop.entity.version", OPENLLMETRY, _version),
)
RETRIEVER_VERSION: tuple[Source, ...] = (
    Source("ragpulse.retriever.version", "ragpulse", _version),
    Source("retriever.version", "ragpulse", _version),
)
SESSION: tuple[Source, ...] = (
    Source("session.id", OPENINFERENCE, _text),
    Source("gen_ai.conversation.id", GENAI, _text),
)
USER: tuple[Source, ...] = (
    Source("user.id", OPENINFERENCE, _text),
    Source("enduser.id", "OTel", _text),
)
PROMPT_TOKENS: tuple[Source, ...] = (
    Source("llm.token_count.prompt", OPENINFERENCE, _token_count),
    Source("gen_ai.usage.input_tokens", GENAI, _token_count),
    Source("gen_ai.usage.prompt_tokens", GENAI_LEGACY, _token_count),
)
COMPLETION_TOKENS: tuple[Source, ...] = (
    Source("llm.token_count.completion", OPENINFERENCE, _token_count),
    Source("gen_ai.usage.output_tokens", GENAI, _token_count),
    Source("gen_ai.usage.completion_tokens", GENAI_LEGACY, _token_count),
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
