"""A byte-level tokenizer for the tiny random models: 256 byte tokens + 4 specials.

Any text round-trips, so tiny models work with real prompts in tests without shipping a
vocabulary file.
"""

from __future__ import annotations

from functools import lru_cache

SPECIALS = ["<unk>", "<s>", "</s>", "<pad>"]


@lru_cache(maxsize=1)
def _byte_tokenizer_object():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()  # the 256 printable stand-ins for raw bytes
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def byte_tokenizer():
    """A `PreTrainedTokenizerFast` over bytes (vocab 260) with a minimal chat template."""
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=_byte_tokenizer_object().__class__.from_str(_byte_tokenizer_object().to_str()),
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    return tok
