"""Realistic RAG traffic for ``ragpulse up --demo``, sent through the real OpenTelemetry SDK.

Three services answer questions over a small built-in corpus, each with its own resource
(``service.name``, ``deployment.environment.name``) and its own OTLP exporter pointed at the
collector: ``support-bot`` (English, OpenInference spans), ``docs-search`` (English, OpenInference
plus OTel GenAI attributes, with a reranker) and ``faq-ja`` (Japanese). Some answers are
hallucinated (a changed number or name), some retrievals miss (irrelevant contexts), some answers
are non-committal, and some users give a thumbs-down, so every dashboard has something to show.

The story (``ragpulse status --why faithfulness`` tells it): the English services answer with
prompt ``v1`` or ``v2``, half the time each. For the first :data:`TURN_AFTER_S` seconds (5
minutes) every prompt answers alike (4 % hallucinated); then ``v2`` turns unfaithful (40 %
hallucinated) and, at the same time, ``faq-ja``'s traffic doubles without any change in its
answers. Five minutes later, ``status --why faithfulness`` (the last 5 minutes against the 5
before) names ``prompt_version = v2`` first, a rate (it got worse), and ``faq-ja`` as mix (it
got more traffic), as do the report and the dashboard's "What changed" panel over the last 10
minutes. No faithfulness alert fires: a regression of one prompt in half of two services'
traffic is what the drop decomposition is for.

The other story, ``incident`` (``ragpulse up --demo --demo-story incident``): from the first
trace ``support-bot`` answers with prompt ``v2`` only, and :data:`INCIDENT_HALLUCINATED` of its
answers are hallucinated (a bad prompt rolled out to the whole service at once). Its faithfulness
falls under the judge's absolute alert level as soon as the rule has its minimum of samples
(``ragpulse-faithfulness-low-<judge>`` fires for ``support-bot``, about a minute in at 2 traces/s),
while ``docs-search`` and ``faq-ja`` stay quiet.

Deterministic for a given seed. Not thread-safe: one :class:`DemoTraffic` per thread.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass

__all__ = ["CORPUS", "INCIDENT_HALLUCINATED", "STORIES", "TURN_AFTER_S", "DemoTraffic", "Scenario",
           "plan_scenario"]

V2_TURNED_HALLUCINATED = 0.40
"""Share of prompt ``v2``'s answers that are hallucinated after the turn (4 % before, as ``v1``)."""
INCIDENT_HALLUCINATED = 0.80
"""Share of ``support-bot``'s answers that are hallucinated in the ``incident`` story."""
STORIES = ("drop", "incident")
"""The demo's stories: ``drop`` (default: prompt v2 turns unfaithful after :data:`TURN_AFTER_S`,
no alert; ``status --why`` explains it) and ``incident`` (support-bot fires its absolute-level
alert)."""
TURN_AFTER_S = 300.0
"""Seconds of demo traffic (at its rate) after which prompt ``v2`` turns unfaithful and
``faq-ja``'s traffic doubles."""


@dataclass(frozen=True)
class Doc:
    """One document of the demo corpus: a question it answers, the right and a wrong answer."""

    id: str
    text: str
    question: str
    answer: str
    wrong_answer: str


CORPUS: dict[str, tuple[Doc, ...]] = {
    "en": (
        Doc("eiffel", "The Eiffel Tower was opened to the public on 31 March 1889. It is 330 metres tall "
            "and was built by Gustave Eiffel's company for the Exposition Universelle.",
            "When did the Eiffel Tower open to the public?",
            "The Eiffel Tower opened to the public on 31 March 1889.",
            "The Eiffel Tower opened to the public in 1925 and was designed by Le Corbusier."),
        Doc("refund", "Customers can request a refund within 30 days of purchase. Refunds are paid to the "
            "original payment method within 5 business days.",
            "How long do I have to ask for a refund?",
            "You can request a refund within 30 days of purchase; it is paid back within 5 business days.",
            "You can request a refund within 90 days, and it is paid in store credit only."),
        Doc("password", "To reset your password, open Settings, choose Security and click Reset password. "
            "A reset link is sent to your registered email address and expires after 24 hours.",
            "How do I reset my password?",
            "Open Settings, choose Security and click Reset password; the emailed link expires after 24 hours.",
            "Call our support line and an agent will read your new password to you; it never expires."),
        Doc("shipping", "Standard shipping takes 3 to 5 business days within the EU. Express shipping "
            "delivers the next business day for orders placed before 2 pm.",
            "How long does standard shipping take?",
            "Standard shipping takes 3 to 5 business days within the EU.",
            "Standard shipping takes 2 weeks and is only available outside the EU."),
        Doc("api-limits", "The free plan allows 1,000 API requests per day. The pro plan raises the limit "
            "to 100,000 requests per day and adds priority support.",
            "How many API requests per day does the free plan allow?",
            "The free plan allows 1,000 API requests per day.",
            "The free plan allows unlimited API requests, and priority support is included."),
        Doc("everest", "Mount Everest is 8,849 metres high. It lies on the border between Nepal and China "
            "and was first climbed in 1953 by Edmund Hillary and Tenzing Norgay.",
            "Who first climbed Mount Everest?",
            "Mount Everest was first climbed in 1953 by Edmund Hillary and Tenzing Norgay.",
            "Mount Everest was first climbed in 1921 by George Mallory alone."),
    ),
    "ja": (
        Doc("fuji", "富士山は静岡県と山梨県にまたがる活火山で、標高は3776メートルである。日本最高峰の山として知られる。",
            "富士山の標高は何メートルですか？", "富士山の標高は3776メートルです。",
            "富士山の標高は4200メートルで、北海道にあります。"),
        Doc("henpin", "商品の返品は到着から14日以内であれば受け付けます。返金は元の支払い方法に7営業日以内に行われます。",
            "返品はいつまでできますか？", "返品は商品到着から14日以内であれば可能です。",
            "返品は購入から1年以内ならいつでも可能で、現金で返金されます。"),
        Doc("biwa", "琵琶湖は滋賀県にある日本最大の湖で、面積は約670平方キロメートルである。",
            "日本最大の湖はどこにありますか？", "日本最大の湖は琵琶湖で、滋賀県にあります。",
            "日本最大の湖は十和田湖で、青森県にあります。"),
        Doc("shinkansen", "東海道新幹線は1964年10月1日に開業した。東京と新大阪を結び、最速の列車は約2時間半で走る。",
            "東海道新幹線はいつ開業しましたか？", "東海道新幹線は1964年10月1日に開業しました。",
            "東海道新幹線は1972年に開業し、東京と福岡を結んでいます。"),
    ),
}

SERVICES: tuple[tuple[str, str, str, bool], ...] = (
    # service, language, environment, genai attributes
    ("support-bot", "en", "production", False),
    ("docs-search", "en", "production", True),
    ("faq-ja", "ja", "production", False),
)


@dataclass(frozen=True)
class Scenario:
    """One interaction to emit: what was asked, what was retrieved, what was answered."""

    service: str
    language: str
    environment: str
    genai: bool
    question: str
    contexts: tuple[str, ...]
    answer: str
    kind: str  # faithful | hallucinated | irrelevant | noncommittal
    model: str
    prompt_version: str
    retriever_version: str
    thumbs_down: bool
    rerank: bool


def _check_story(story: str) -> None:
    if story not in STORIES:
        raise ValueError(f"unknown demo story {story!r}: one of {', '.join(STORIES)}")


def plan_scenario(rng: random.Random, *, turned: bool = True, story: str = "drop") -> Scenario:
    """Draw one interaction, before (``turned=False``) or after the demo's turn: after it,
    prompt ``v2`` hallucinates more and ``faq-ja`` has twice the traffic of each other service.
    ``story="incident"``: support-bot answers with ``v2`` only, :data:`INCIDENT_HALLUCINATED`
    of them hallucinated, whatever ``turned`` says. Pure: the same RNG state gives the same
    scenario."""
    _check_story(story)
    service, lang, env, genai = rng.choices(SERVICES, weights=(1, 1, 2) if turned else (1, 1, 1))[0]
    docs = CORPUS[lang]
    doc = rng.choice(docs)
    others = [d for d in docs if d is not doc]
    prompt_version = rng.choice(("v1", "v2")) if lang == "en" else "ja-v1"
    # Rates of a service worth running: most answers faithful, so no faithfulness alert fires
    # (neither the drop against the baseline nor the judge's absolute level, dashboards.levels;
    # tests/dashboards checks it) and v2's regression shows in `status --why` and the
    # prompt-version breakdown rather than as an alert storm on a new user's first screen.
    # faq-ja has always been a little weaker: its growth lowers the mean by mix alone.
    if story == "incident" and service == "support-bot":
        prompt_version, p_halluc = "v2", INCIDENT_HALLUCINATED
    elif prompt_version == "v2" and turned and story == "drop":
        p_halluc = V2_TURNED_HALLUCINATED
    else:
        p_halluc = 0.12 if service == "faq-ja" else 0.04
    roll = rng.random()
    if roll < p_halluc:
        kind = "hallucinated"
    elif roll < p_halluc + 0.04:
        kind = "irrelevant"
    elif roll < p_halluc + 0.07:
        kind = "noncommittal"
    else:
        kind = "faithful"
    k = min(3, len(docs))
    if kind == "irrelevant":
        ctx_docs = rng.sample(others, k=min(k, len(others)))
    else:
        ctx_docs = [doc] + rng.sample(others, k=k - 1)
        rng.shuffle(ctx_docs) if rng.random() < 0.3 else None
    answer = {
        "faithful": doc.answer,
        "hallucinated": doc.wrong_answer,
        "irrelevant": doc.answer,
        "noncommittal": "申し訳ありませんが、わかりません。" if lang == "ja" else "I'm sorry, I don't know.",
    }[kind]
    return Scenario(
        service=service, language=lang, environment=env, genai=genai, question=doc.question,
        contexts=tuple(d.text for d in ctx_docs), answer=answer, kind=kind,
        model=rng.choice(("gpt-4o-mini", "llama-3.1-8b")) if service != "faq-ja" else "gpt-4o-mini",
        prompt_version=prompt_version,
        retriever_version="bm25-v1" if service == "faq-ja" else rng.choice(("dense-v3", "dense-v4")),
        thumbs_down=kind != "faithful" and rng.random() < 0.3,
        rerank=service == "docs-search",
    )


class DemoTraffic:
    """Emits scenarios at ``rate`` traces per second to an OTLP/HTTP endpoint until stopped;
    the first ``turn_after_s`` seconds' worth of them before the story's turn.

    ``start()`` returns at once (a daemon thread sends); ``shutdown()`` stops it and flushes every
    provider's exporter, so what was emitted reaches the collector. Idempotent.
    """

    def __init__(self, endpoint: str, *, rate: float = 2.0, seed: int = 7,
                 limit: int | None = None, turn_after_s: float = TURN_AFTER_S,
                 story: str = "drop") -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        _check_story(story)
        self.story = story
        if turn_after_s < 0:
            raise ValueError("turn_after_s must not be negative")
        self.endpoint = endpoint
        self.rate = rate
        self.limit = limit
        self.sent = 0
        self.turn_at = round(turn_after_s * rate)
        """Traces sent before the turn (the story), counted rather than timed: deterministic."""
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._providers: dict[str, object] = {}
        self._tracers: dict[tuple[str, bool], object] = {}

    def _tracer(self, sc: Scenario):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from ragpulse.instrument import RagTracer

        key = (sc.service, sc.genai)
        if key not in self._tracers:
            provider = self._providers.get(sc.service)
            if provider is None:
                provider = TracerProvider(resource=Resource.create({
                    "service.name": sc.service, "deployment.environment.name": sc.environment,
                    "service.version": "demo"}))
                provider.add_span_processor(BatchSpanProcessor(
                    OTLPSpanExporter(endpoint=self.endpoint, timeout=10), schedule_delay_millis=500))
                self._providers[sc.service] = provider
            self._tracers[key] = RagTracer(provider, genai=sc.genai)
        return self._tracers[key]

    def emit(self, sc: Scenario) -> str:
        """Emit one trace for ``sc``; returns its trace id (32 hex)."""
        rag = self._tracer(sc)
        docs = [{"id": f"doc-{i}", "content": c, "score": round(0.9 - 0.1 * i, 3)}
                for i, c in enumerate(sc.contexts)]
        with rag.query(sc.question, prompt_version=sc.prompt_version,
                       retriever_version=sc.retriever_version,
                       session_id=f"s-{self._rng.randrange(1000)}") as q:
            with rag.retrieve(sc.question, data_source="kb", top_k=len(docs),
                              retriever_version=sc.retriever_version) as r:
                r.set_documents(docs)
            if sc.rerank:
                with rag.rerank(sc.question, docs, model="rerank-mini", top_k=len(docs)) as rr:
                    rr.set_output_documents(docs)
            system = "Answer using only the context.\n\nContext:\n" + "\n\n".join(sc.contexts)
            with rag.llm(sc.model, provider="openai", prompt_version=sc.prompt_version,
                         messages=[("system", system), ("user", sc.question)]) as call:
                call.set_output(sc.answer)
                call.set_usage(len(system) // 4 + len(sc.question) // 4, len(sc.answer) // 4)
            q.set_answer(sc.answer)
        if sc.thumbs_down:
            rag.feedback(q, score=0.0, label="thumbs_down")
        self.sent += 1
        return q.trace_id

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            if self.limit is not None and self.sent >= self.limit:
                return
            self.emit(plan_scenario(self._rng, turned=self.sent >= self.turn_at, story=self.story))
            next_at += interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> DemoTraffic:
        """Send traces on a daemon thread at ``rate`` per second (until ``limit``). Idempotent."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ragpulse-demo", daemon=True)
            self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop the sender thread (waits up to 10 s) and flush and close the tracer providers."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for provider in self._providers.values():
            provider.shutdown()  # type: ignore[attr-defined]
        self._providers.clear()
        self._tracers.clear()
