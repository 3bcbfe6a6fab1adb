"""CPU threads for a model, measured rather than guessed.

On a CPU the fastest torch thread count for a step depends on the step's shape and on what else
the machine runs: a single-token decode of a small model is often fastest on one thread (the
work per thread is too small to pay for the synchronisation), a verify step over γ + 1 tokens
of a large one on all of them, and cores another job is using make any count above the free
ones slower. `probe_threads` times both steps of a loaded model at every count 1..n (n: the
cores this process may use), interleaved — count 1, 2, ..., n, then again — so that a change in
the machine's load falls on every count alike, and keeps the median per count. `ThreadProbe.best`
picks the fastest count for a step (the smaller count when two are equally fast). The probe stays short
(see `probe_threads`).

The engine runs its target's and its drafter's forwards at their own counts (`SpeculativeEngine`
``threads``, through `using_threads`), so a round costs draft(drafter's count) + verify(target's).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from specbench.bounds import check
from specbench.errors import SpecbenchError

PROBE_CONTEXT = 64  # cached tokens the probed steps attend over
PROBE_REPEATS = 3
PROBE_BUDGET_S = 3.0  # timed rounds stop after this (one round at least)
PRUNE_FACTOR = 2.0  # a count whose first decode step is this many times the fastest one's is dropped


def parse_thread_setting(value, where: str) -> int | str | None:
    """A ``threads`` setting: unset (None), a count >= 1 (a digit string too) or ``auto``."""
    if value is None or value == "auto":
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value.strip()) < 10:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecbenchError(f"{where}: 'threads' must be a count >= 1 or auto, got {value!r}")
    return check("threads", value, where, "threads")  # the bounds table: 1 to 1024


@dataclass(frozen=True)
class RoleThreads:
    """Thread counts of one engine: the target's forwards (prefill, verify) and the drafter's."""

    target: int
    drafter: int


@dataclass
class ThreadProbe:
    """Median seconds of one decode step and one verify step per thread count."""

    verify_tokens: int
    decode_s: dict[int, float] = field(default_factory=dict)
    verify_s: dict[int, float] = field(default_factory=dict)

    def best(self, tokens: int) -> int:
        """The fastest count for a forward of ``tokens`` new tokens (1: decode, else verify)."""
        times = self.decode_s if tokens == 1 else self.verify_s
        return min(times, key=lambda n: (times[n], n))  # a dropped count's verify time is inf

    def to_dict(self) -> dict:
        def ms(times: dict[int, float]) -> dict[str, float | None]:  # None: dropped before it was timed
            return {str(n): round(s * 1e3, 3) if math.isfinite(s) else None for n, s in sorted(times.items())}

        return {"verify_tokens": self.verify_tokens, "decode_ms": ms(self.decode_s), "verify_ms": ms(self.verify_s)}


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def using_threads(count: int | None) -> Iterator[None]:
    """torch's CPU thread count set to ``count`` inside the block (None: left alone), restored after."""
    if count is None:
        yield
        return
    before = torch.get_num_threads()
    if count != before:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _timed(decoder, ids: torch.Tensor) -> float:
    """Seconds of one forward of ids [1, T] after the cached context (the cache is put back after)."""
    start = decoder.length
    t0 = time.perf_counter()
    decoder.forward(ids, logits="last")
    seconds = time.perf_counter() - t0
    decoder.truncate(start)
    return seconds


def probe_threads(
    decoder,
    verify_tokens: int,
    max_threads: int | None = None,
    repeats: int = PROBE_REPEATS,
    context: int = PROBE_CONTEXT,
    seed: int = 0,
    budget_s: float = PROBE_BUDGET_S,
) -> ThreadProbe:
    """Time a decode step and a verify step of ``verify_tokens`` (γ + 1) tokens at 1..max_threads
    threads (default: `available_cores`) over a cache of ``context`` random tokens: one untimed
    round, then ``repeats`` interleaved rounds, medians per count. The decoder's cache is reset
    (engines reset it when they start a generation).

    Kept short: in the untimed round a count whose decode step already takes PRUNE_FACTOR × the
    fastest count's is dropped before its verify step (a core busy with another job makes a count
    above the free cores many times slower — 3.6 s for a SmolLM2 verify step measured here — and
    such a count cannot win); its row then holds that one decode time and no verify time (inf).
    Timed rounds stop once ``budget_s`` has passed since the probe began, after at least one."""
    counts = list(range(1, (max_threads or available_cores()) + 1))
    vocab = decoder.model.get_input_embeddings().weight.shape[0]
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(vocab, (1, context), generator=gen).to(decoder.device)  # [1, context]
    step = torch.randint(vocab, (1, verify_tokens), generator=gen).to(decoder.device)  # [1, γ + 1]
    decoder.reset(1, context + verify_tokens + 1)
    decoder.forward(prompt, logits="none")
    started = time.perf_counter()
    decode: dict[int, list[float]] = {n: [] for n in counts}
    verify: dict[int, list[float]] = {n: [] for n in counts}
    dropped: dict[int, float] = {}  # count -> its one (untimed) decode time
    for n in counts:  # untimed round: warms every count up, drops the hopeless ones
        with using_threads(n):
            d = _timed(decoder, step[:, :1])
            if n > 1 and d > PRUNE_FACTOR * min(s[0] for s in decode.values() if s):
                dropped[n] = d
                continue
            decode[n].append(d)
            verify[n].append(_timed(decoder, step))
    live = [n for n in counts if n not in dropped]
    decode, verify = {n: [] for n in live}, {n: [] for n in live}
    for repeat in range(repeats):
        if repeat and time.perf_counter() - started > budget_s:
            break
        for n in live:
            with using_threads(n):
                decode[n].append(_timed(decoder, step[:, :1]))
                verify[n].append(_timed(decoder, step))
    return ThreadProbe(
        verify_tokens,
        {**{n: statistics.median(s) for n, s in decode.items()}, **dropped},
        {**{n: statistics.median(s) for n, s in verify.items()}, **{n: math.inf for n in dropped}},
    )
