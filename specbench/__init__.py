"""specbench: benchmark and tune speculative decoding for large language models."""

__version__ = "0.1.0"
