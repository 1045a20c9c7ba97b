"""ragpulse.collector: the OTLP receiver that keeps RAG traces and produces them to Kafka."""
