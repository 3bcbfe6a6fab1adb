"""Warm-up before timing: every shape a timed generation will meet, run once, untimed.

A timed unit must not pay a first-use cost. On the CPU such costs come per shape: oneDNN creates a
primitive for each row count a packed product meets, the KV cache is reallocated when a generation needs
more positions than any before it, and the first call of a path (a drafter's, the sampling rule's) builds
what it needs. A chain configuration with draft length γ verifies k = 1 + d tokens in a round, where
d = 0 … γ (a prompt-lookup drafter proposes fewer than γ when its match runs out or finds none; the last
round before the length limit drafts fewer), over a cache holding L tokens, L from the prompt's length P to
P + max_new_tokens − 1. A tree verifies 1 + (its nodes) tokens, or fewer for a dynamic tree.

`warm_engine` therefore, untimed:

1. sizes the target's KV cache (and a draft model's) for the longest generation the caller names, so that no
   timed generation reallocates it;
2. runs every verify size k = 1 … 1 + nodes through the engine's own verify step (its LM-head mode and its
   acceptance rule, greedy or sampled) after the prompt and again after ``context`` − k cached tokens (the
   far end of the context the units reach), and the same row counts through a draft model's own decoder;
3. generates a few tokens with the configuration (its drafter, sampling and schedule paths).

`ShapeLog` is what a decoder records when asked (`NativeDecoder.shape_log`): the shapes of its forwards
after a cached prefix (batch, new tokens, which logits), of its LM-head calls (rows), and each KV-cache
allocation (its capacity). A test compares the shapes met while timing with those met while warming up.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specbench.engine.drafters.base import chain_proposal

WARMUP_TOKENS = 8  # tokens of the short warm-up generation (drafter, sampling and schedule paths)


class ShapeLog(set):
    """The shapes a decoder met: ``("step", batch, tokens, logits)`` for a forward after a cached prefix,
    ``("prefill", batch)`` for one into an empty cache (its length is the prompt's: not a shape warm-up can
    cover, and not decode time), ``("head", rows)`` for an LM-head call, ``("cache", capacity)`` for a
    KV-cache allocation."""


@dataclass(frozen=True)
class WarmedShapes:
    """What `warm_engine` ran: the verify sizes, the longest context, the cache capacity it left."""

    verify_tokens: tuple[int, ...]
    context: int
    capacity: int

    def to_dict(self) -> dict:
        return {"verify_tokens": list(self.verify_tokens), "context": self.context, "kv_capacity": self.capacity}


def verify_sizes(engine) -> tuple[int, ...]:
    """Tokens one verify forward of ``engine`` may take: 1 (nothing drafted) … 1 + the shape's nodes."""
    nodes = engine.shape.num_nodes if engine.shape is not None else 0
    return tuple(range(1, nodes + 2))


def filler(prompt: list[int], length: int) -> torch.Tensor:
    """``length`` tokens repeating the prompt, [1, length] (what a warm-up step feeds: values do not matter)."""
    repeats = -(-length // len(prompt))
    return torch.tensor([(prompt * repeats)[:length]], dtype=torch.long)


def warm_engine(engine, prompt_ids: list[int], context: int, *, generate: bool = True) -> WarmedShapes:
    """Run every shape a timed generation of ``engine`` on prompts of up to ``context`` − ``max_new`` tokens
    will meet, untimed (the module docstring); ``context``: the most tokens a generation holds (prompt +
    max_new_tokens). ``generate``: also the short generation on ``prompt_ids``."""
    prompt = list(prompt_ids)
    max_new = max(context - len(prompt), WARMUP_TOKENS)
    context = len(prompt) + max_new
    sizes = verify_sizes(engine)
    capacity = engine.capacity(len(prompt), max_new)
    generator = torch.Generator(device=engine.device).manual_seed(0)
    decoder = engine.decoder
    drafter_decoder = getattr(engine.drafter, "decoder", None) if engine.drafter is not None else None
    if not hasattr(drafter_decoder, "reset"):  # a drafter without a decoder of its own (prompt lookup)
        drafter_decoder = None
    ids = filler(prompt, context).to(engine.device)  # [1, context]
    far = max(len(prompt), context - max(sizes))  # the far end: the last verify steps' cached tokens
    for cached in dict.fromkeys((len(prompt), far)):
        _fill(decoder, ids, cached, capacity)
        for k in sizes:
            proposal = chain_proposal(ids[:, cached : cached + k - 1])
            engine.verify(proposal, ids[:, cached - 1 : cached], generator)
            decoder.truncate(cached)
        if drafter_decoder is not None:
            _fill(drafter_decoder, ids, cached, capacity)
            for k in sizes:
                drafter_decoder.forward(ids[:, cached : cached + k], logits="all")
                drafter_decoder.truncate(cached)
    if generate:
        engine.generate(prompt, WARMUP_TOKENS, seed=0, stop_at_eos=False)
    return WarmedShapes(sizes, context, int(getattr(decoder.cache, "capacity", capacity) or capacity))


def _fill(decoder, ids: torch.Tensor, cached: int, capacity: int) -> None:
    """Leave ``decoder``'s cache (room for ``capacity`` positions) holding the first ``cached`` tokens of ids
    [1, N]."""
    decoder.reset(1, capacity)
    decoder.forward(ids[:, :cached], logits="none")
