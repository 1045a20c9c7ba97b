"""Judges turn samples into findings: an LLM over any OpenAI-compatible API, or local models."""
