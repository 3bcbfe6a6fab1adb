"""Engines kept alive between configurations: a bounded pool, least recently used first out.

An adaptive sweep measures the same configurations again in each look; a serving backend that stopped
every engine after its configuration would start all of them again in every look (minutes each on a GPU
for a large target). `vllm` (in-process workers) and `vllm-server` (launched servers) keep up to
``engines_kept`` engines, keyed by their ``speculative_config``. When one more must start, the least
recently used one stops — the target-only engine last, since every look runs it first.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

TARGET_ONLY_KEY = json.dumps(None)  # the key of the engine without speculation


def make_room(engines: OrderedDict, kept: int, stop: Callable[[str], None], pinned: str = TARGET_ONLY_KEY) -> None:
    """Stop engines of ``engines`` (key → engine, least recently used first) with ``stop(key)`` until one more
    fits under ``kept``; ``pinned`` goes last."""
    while engines and len(engines) >= kept:
        victims = [key for key in engines if key != pinned] or list(engines)
        stop(victims[0])
