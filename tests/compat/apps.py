"""Small RAG apps written the way each framework's own tutorial writes them, on fake models.

Fake LLMs are the frameworks' own (LlamaIndex ``MockLLM``, LangChain ``FakeListChatModel``) or
the real ``openai`` client against the project's OpenAI-compatible server on loopback
(:mod:`testkit.openai_server`), which Haystack's ``OpenAIChatGenerator`` uses too. Fake
embeddings are the frameworks' own (``MockEmbedding``, ``DeterministicFakeEmbedding``); Haystack
retrieves with BM25 and needs none. Nothing here knows about tracing: the instrumentor under test
does all of it.

Each app returns :class:`Seen`: the question it asked, the contexts it actually put in front of
the model (rank order, as the framework reported them) and the answer it got back. That is the
truth a trace of the run must yield.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

QUESTION = "When did the Eiffel Tower open to the public?"
DOCS = (
    "The Eiffel Tower opened to the public on 31 March 1889, after two years of construction.",
    "Paris hosts more than 30 million tourists every year.",
    "Mount Everest is 8,849 metres high.",
)
ANSWER = "The Eiffel Tower opened to the public on 31 March 1889."
MODEL = "gpt-4o-mini"
SYSTEM = "Answer the question from the context only."


@dataclass(frozen=True)
class Seen:
    """What one app run asked, retrieved (rank order) and answered."""

    question: str
    contexts: tuple[str, ...]
    answer: str


# -- LlamaIndex ---------------------------------------------------------------------------------


def llamaindex_index(docs: tuple[str, ...] = DOCS) -> Any:
    """A ``VectorStoreIndex`` over ``docs`` (chunked by the default ``SentenceSplitter``,
    embedded by ``MockEmbedding``): building it is an indexing trace, not a RAG query."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding

    return VectorStoreIndex.from_documents(
        [Document(text=d) for d in docs], embed_model=MockEmbedding(embed_dim=8)
    )


def llamaindex_query(index: Any, question: str = QUESTION, top_k: int = 2) -> Seen:
    """The LlamaIndex starter: ``index.as_query_engine().query(question)`` with ``MockLLM``."""
    from llama_index.core.llms import MockLLM

    engine = index.as_query_engine(llm=MockLLM(max_tokens=8), similarity_top_k=top_k)
    response = engine.query(question)
    return Seen(
        question,
        tuple(n.node.get_content() for n in response.source_nodes),
        str(response).strip(),
    )


def llamaindex_synthesize(question: str = QUESTION, docs: tuple[str, ...] = DOCS) -> Seen:
    """Retrieval done outside LlamaIndex, synthesis by its default (compact-and-refine)
    response synthesizer: no retriever span exists in such a trace."""
    from llama_index.core import get_response_synthesizer
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import NodeWithScore, TextNode

    nodes = [NodeWithScore(node=TextNode(text=d), score=1.0 - i / 10) for i, d in enumerate(docs)]
    response = get_response_synthesizer(llm=MockLLM(max_tokens=8)).synthesize(question, nodes=nodes)
    return Seen(question, docs, str(response).strip())


# -- LangChain ----------------------------------------------------------------------------------


def langchain_rag(question: str = QUESTION, answer: str = ANSWER) -> Seen:
    """The LangChain RAG tutorial chain (LCEL): retriever | format_docs, prompt, chat model,
    ``StrOutputParser``; an in-memory vector store with ``DeterministicFakeEmbedding``."""
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.runnables import RunnablePassthrough
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document(page_content=d) for d in DOCS])
    retriever = store.as_retriever(search_kwargs={"k": 2})
    seen: list[str] = []

    def format_docs(docs: list[Any]) -> str:
        seen.extend(d.page_content for d in docs)
        return "\n\n".join(d.page_content for d in docs)

    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM + "\n\nContext:\n{context}"), ("human", "{question}")]
    )
    chain = (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=[answer])
        | StrOutputParser()
    )
    out = chain.invoke(question)
    return Seen(question, tuple(seen), out)


def langchain_chat(question: str = QUESTION, answer: str = ANSWER) -> Seen:
    """A prompt | chat model chain with no retrieval at all: a chatbot, not RAG."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate

    prompt = ChatPromptTemplate.from_messages([("system", SYSTEM), ("human", "{question}")])
    chain = prompt | FakeListChatModel(responses=[answer]) | StrOutputParser()
    return Seen(question, (), chain.invoke({"question": question}))


# -- Haystack -----------------------------------------------------------------------------------


def haystack_rag(base_url: str, question: str = QUESTION) -> Seen:
    """The Haystack RAG tutorial pipeline: in-memory BM25 retriever, ``ChatPromptBuilder``,
    ``OpenAIChatGenerator`` (pointed at ``base_url``). Set ``HAYSTACK_TELEMETRY_ENABLED=False``
    before the first ``import haystack``, or it pings its telemetry service."""
    from haystack import Document, Pipeline
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.utils import Secret

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=d) for d in DOCS])
    template = [
        ChatMessage.from_system(
            SYSTEM + "\n\nContext:\n{% for d in documents %}{{ d.content }}\n\n{% endfor %}"
        ),
        ChatMessage.from_user("{{ question }}"),
    ]
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=2))
    pipe.add_component(
        "prompt", ChatPromptBuilder(template=template, required_variables=["question", "documents"])
    )
    pipe.add_component(
        "llm",
        OpenAIChatGenerator(
            api_key=Secret.from_token("sk-test"), model=MODEL, api_base_url=base_url
        ),
    )
    pipe.connect("retriever.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "llm.messages")
    out = pipe.run(
        {"retriever": {"query": question}, "prompt": {"question": question}},
        include_outputs_from={"retriever"},
    )
    return Seen(
        question,
        tuple(d.content for d in out["retriever"]["documents"]),
        out["llm"]["replies"][0].text,
    )


def haystack_index(docs: tuple[str, ...] = DOCS) -> int:
    """The indexing half of the Haystack tutorial: a pipeline whose ``DocumentWriter`` fills
    an in-memory store. Returns the documents written."""
    from haystack import Document, Pipeline
    from haystack.components.writers import DocumentWriter
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    pipe = Pipeline()
    pipe.add_component("writer", DocumentWriter(InMemoryDocumentStore()))
    out = pipe.run({"writer": {"documents": [Document(content=d) for d in docs]}})
    return int(out["writer"]["documents_written"])


# -- the openai client --------------------------------------------------------------------------


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def openai_rag(base_url: str, question: str = QUESTION) -> Seen:
    """No framework: the app ranks its documents itself (word overlap), puts the best two in the
    system prompt and calls ``chat.completions.create`` with the official client."""
    import openai

    hits = sorted(DOCS, key=lambda d: -len(_words(d) & _words(question)))[:2]
    messages = [
        {"role": "system", "content": SYSTEM + "\n\nContext:\n" + "\n\n".join(hits)},
        {"role": "user", "content": question},
    ]
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
    try:
        reply = client.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
    finally:
        client.close()
    return Seen(question, tuple(hits), reply.choices[0].message.content or "")
