"""Span attribute and event names that ragpulse itself defines (docs/instrumentation.md).

Apps set them (directly or through :mod:`ragpulse.instrument`); the scorer reads them. Names
from the OpenInference, OTel GenAI and OpenLLMetry conventions are read by the scorer's
extractor and are not repeated here.
"""

PROMPT_VERSION = "ragpulse.prompt.version"
RETRIEVER_VERSION = "ragpulse.retriever.version"
FEEDBACK_EVENT = "ragpulse.feedback"
FEEDBACK_SCORE = "ragpulse.feedback.score"
FEEDBACK_LABEL = "ragpulse.feedback.label"
FEEDBACK_COMMENT = "ragpulse.feedback.comment"
