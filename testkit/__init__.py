"""Fakes and builders that both the tests and the benchmarks use: OTLP requests and scorer
records of realistic RAG traces, an OpenAI-compatible server, a ClickHouse HTTP stand-in, a table
embedder. Not part of the wheel; importable from the editable install (``make install``).

Modules
    ``payloads``           OTLP trace requests as instrumented apps export them (the collector)
    ``traffic``            RAG traces as Kafka records in otelcol's and rotel's shapes (the scorer)
    ``openai_server``      an OpenAI-compatible server on loopback, scripted per route
    ``clickhouse_server``  a writable ClickHouse HTTP stand-in over chDB
    ``judge``              a table embedder and one faithfulness sample for the LLM judge

testkit imports only ragpulse: never tests, bench or train (tests/test_layers.py).
"""
