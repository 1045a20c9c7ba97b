"""Extract (question, contexts, answer) and row metadata from the spans of one trace.

A pure function of the spans (:func:`extract`), reading the attribute names documented in
docs/instrumentation.md §5 across the conventions declared in :mod:`ragpulse.common.conventions`:
OpenInference, OTel GenAI (new and pre-1.37, attributes and events), OpenLLMetry (new and
legacy), ``db.query.result`` span events, TruLens and Confident AI.

Each field has an ordered table of (source, reader) rows in :mod:`.sources`, and the first row
that yields a value wins; each extraction records in ``meta.sources`` which row that was. In
short:

* **question**: the root span's input (:data:`.sources.ROOT_QUESTION`); else the first
  retriever's (then reranker's) query (``RETRIEVAL_QUERY``); else the final LLM prompt
  (template variable ``question``/``query``, or the last user message, or its ``Question:``
  section when the message also holds the context).
* **contexts**: every retrieval span (``RETRIEVAL_SPAN``) ordered by start time, its documents
  from ``RETRIEVAL_DOCUMENTS``; a RERANKER's ``output_documents`` replace the documents of the
  retrievers it reranked (what the LLM saw wins); identical texts are kept once. Else the nodes
  a LlamaIndex synthesizer was given, else the final LLM prompt (:func:`split_prompt`).
* **answer**: the root's output (``ROOT_ANSWER``); else the last assistant message of the LLM
  span that ended last (``LLM_OUTPUT``, then ``LLM_EVENTS``).

Modules, each used by the others through its public names only (``tests/test_layers.py``): one
per convention family whose values need code (:mod:`.openinference`, :mod:`.genai`,
:mod:`.openllmetry`, :mod:`.events`), :mod:`.readers` for the simple readers the declarations'
keys are read with, :mod:`.values` (tolerant scalars and JSON), :mod:`.messages` (LLM message
shapes), :mod:`.families` (each span's attribute families, memoized), :mod:`.prompt` for the
prompt fallback, :mod:`.sources` for the tables, :mod:`.trace` for the walk, :mod:`.facts` for
the row metadata, :mod:`.results` for the types.
Attribute values of unexpected types are skipped, never raised on.
"""

from .prompt import split_prompt
from .results import NEGATIVE_FEEDBACK_LABELS, Extraction, ExtractionSettings, TraceFacts
from .sources import source_matrix
from .trace import extract

__all__ = [
    "NEGATIVE_FEEDBACK_LABELS",
    "Extraction",
    "ExtractionSettings",
    "TraceFacts",
    "extract",
    "source_matrix",
    "split_prompt",
]
