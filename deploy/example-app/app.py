"""A small RAG app that emits correct RAG traces through the OpenTelemetry SDK.

It stands in for a user's app in ``deploy/compose.yaml`` and in the deployment tests: a keyword
retriever over a tiny built-in corpus, an "LLM" that answers from the retrieved passage (some
answers deliberately unsupported, some retrievals deliberately off-topic, so the dashboards show
both good and bad scores), all wrapped in spans by
:class:`ragpulse.instrument.RagTracer`. Nothing leaves the process except OTLP.

Configured by the standard OpenTelemetry SDK variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``) and by flags::

    python deploy/example-app/app.py --traces 100 --rate 5      # then exits
    python deploy/example-app/app.py --rate 2                   # forever, until SIGTERM

Prints the trace id of every interaction on stdout (one per line) so a test can check each of
them reached the scores table. Exit status 0 once the last batch was flushed, 1 when the flush
timed out (export errors themselves are logged by the SDK, which retries retryable ones).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import threading

CORPUS = [
    (
        "kafka-1",
        (
            "Kafka partitions are the unit of parallelism: a consumer group has at most "
            "one active member per partition."
        ),
    ),
    (
        "kafka-2",
        "Kafka keeps records for the retention period of the topic, seven days by default.",
    ),
    (
        "ch-1",
        (
            "ClickHouse ReplacingMergeTree removes rows with the same sorting key during "
            "merges, keeping the row with the highest version."
        ),
    ),
    ("ch-2", "ClickHouse materialized views run on every insert into their source table."),
    (
        "otel-1",
        (
            "The OpenTelemetry Collector batch processor groups spans before export to "
            "reduce the number of requests."
        ),
    ),
    (
        "otel-2",
        (
            "OTLP over HTTP sends protobuf-encoded ExportTraceServiceRequest messages to "
            "/v1/traces, usually on port 4318."
        ),
    ),
    ("fuji-1", "Mount Fuji is 3,776 metres high and is the tallest mountain in Japan."),
    ("fuji-2", "富士山の標高は3776メートルで、日本で最も高い山です。"),
]

QUESTIONS = [
    ("How many active consumers can a Kafka partition have in one group?", "kafka"),
    ("How long does Kafka keep records by default?", "kafka"),
    ("What does ReplacingMergeTree do with duplicate rows?", "ch"),
    ("When do ClickHouse materialized views run?", "ch"),
    ("Why use the batch processor in the OpenTelemetry Collector?", "otel"),
    ("Which port does OTLP over HTTP use?", "otel"),
    ("How high is Mount Fuji?", "fuji"),
    ("富士山の高さは何メートルですか？", "fuji"),
]


def retrieve(question: str, topic: str, rng: random.Random, k: int = 2) -> list[dict[str, object]]:
    """Passages of the question's topic; one interaction in eight gets an off-topic passage."""
    docs = [(doc_id, text) for doc_id, text in CORPUS if doc_id.startswith(topic)]
    if rng.random() < 0.125:
        docs = [d for d in CORPUS if not d[0].startswith(topic)][:k]
    return [
        {"id": doc_id, "content": text, "score": round(1.0 - 0.1 * i, 2)}
        for i, (doc_id, text) in enumerate(docs[:k])
    ]


def generate(docs: list[dict[str, object]], rng: random.Random) -> str:
    """The "LLM": the first passage, or (one in six) a confident unsupported claim."""
    if rng.random() < 1 / 6:
        return "It depends on the cloud provider and is usually about forty-two."
    return str(docs[0]["content"]) if docs else "I don't know."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces", type=int, default=0, help="stop after this many (0: run forever)"
    )
    parser.add_argument(
        "--rate", type=float, default=2.0, help="interactions per second (0: no pause)"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (reproducible traffic)")
    args = parser.parse_args(argv)

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ragpulse.instrument import RagTracer

    resource = Resource.create(
        {
            "service.name": os.environ.get("OTEL_SERVICE_NAME", "example-rag-app"),
            "deployment.environment.name": os.environ.get("APP_ENVIRONMENT", "demo"),
        }
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_* env
    rag = RagTracer(provider)
    rng = random.Random(args.seed)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    done = 0
    while not stop.is_set() and (args.traces == 0 or done < args.traces):
        question, topic = QUESTIONS[rng.randrange(len(QUESTIONS))]
        with rag.query(question, prompt_version="example-v1") as q:
            with rag.retrieve(
                question, data_source="example-corpus", top_k=2, retriever_version="keyword-v1"
            ) as r:
                docs = retrieve(question, topic, rng)
                r.set_documents(docs)
            context = "\n\n".join(str(d["content"]) for d in docs)
            messages = [
                {
                    "role": "system",
                    "content": "Answer from the context only.\n\nContext:\n" + context,
                },
                {"role": "user", "content": question},
            ]
            with rag.llm("example-llm", provider="example", messages=messages) as call:
                answer = generate(docs, rng)
                call.set_output(
                    answer, prompt_tokens=len(context) // 4, completion_tokens=len(answer) // 4
                )
            q.set_answer(answer)
            print(format(q.span.get_span_context().trace_id, "032x"), flush=True)
        done += 1
        if args.rate > 0:
            stop.wait(1.0 / args.rate)
    ok = provider.force_flush(30_000)
    provider.shutdown()
    print(f"sent {done} traces", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
