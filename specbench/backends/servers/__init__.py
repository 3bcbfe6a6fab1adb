"""Talking to a serving engine over HTTP: the hardened client, the answer schema, the OpenAI-compatible client and backend, Prometheus metrics, server processes."""
