"""Open-loop load: when each request of a batch arrives, at a given rate.

A closed-loop batch keeps N requests in flight: a new one is sent when one finishes, so the load
follows the engine's speed. An open-loop batch sends requests when they *arrive*, whatever is still
running — how traffic reaches a server — at a rate of λ requests per second:

* ``poisson``: gaps between arrivals are independent and exponential with mean 1/λ (a Poisson
  process, what ``vllm bench serve`` and GuideLLM use for their request rate);
* ``constant``: one request every 1/λ seconds.

The first request arrives at 0 s (the batch's start). The schedule is drawn from a generator seeded
by the sweep's seed and the batch's load and prompts — not by its configuration — so the baseline and
every speculative configuration at one rate meet the same arrivals, and a rerun meets them again.
"""

from __future__ import annotations

import hashlib

import numpy as np

PROCESSES = ("poisson", "constant")


def arrival_offsets(n: int, rate: float, process: str, seed: int) -> list[float]:
    """Arrival times of ``n`` requests in seconds after the batch starts (the first at 0): gaps
    Exp(mean 1/``rate``) for ``poisson``, exactly 1/``rate`` for ``constant``."""
    if n <= 0:
        return []
    if not rate > 0:
        raise ValueError(f"a request rate must be > 0, got {rate}")
    if process == "constant":
        gaps = np.full(n - 1, 1.0 / rate)
    elif process == "poisson":
        gaps = np.random.default_rng(seed).exponential(1.0 / rate, size=n - 1)
    else:
        raise ValueError(f"unknown arrival process {process!r} (known: {', '.join(PROCESSES)})")
    return [0.0] + np.cumsum(gaps).tolist()


def batch_seed(base_seed: int, *parts) -> int:
    """A 64-bit seed from the sweep's seed and what identifies a batch's load and prompts."""
    text = ":".join(str(p) for p in (base_seed, *parts))
    return int(hashlib.sha1(text.encode()).hexdigest()[:16], 16)
