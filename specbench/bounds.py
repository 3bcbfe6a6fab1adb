"""The bounds table: every number a user can hand specbench, its range, and why.

A flag (``--gamma``, ``--bootstrap``, ``profile --batch``, ``train-drafter --heads``, ...), a sweep
YAML key (``gammas``, ``seed``, ``max_new_tokens``, ``timing.warmup_s``, ...) and a backend option
(``timeout_s``, ``port``, ...) that mean the same quantity read the same row of `BOUNDS`, so
``run`` and ``sweep`` share their limits and ``--dry-run`` refuses what the run would. A value
outside its row is one line naming the key, the range and the reason; NaN and ±inf are never
inside a row; booleans are not numbers; a whole-valued float (``4.0``) is accepted for an
integer.

The bounds are not physical limits: each stops a value that cannot mean anything useful
before it costs memory or time (``--bootstrap 1e9`` allocates replicates × prompts floats,
``--temperature 1e-300`` overflows logits ÷ T to inf). Where a later check knows better (a
model's context window, a drafter's head count), that check still runs; the table only keeps
every value finite and small enough to reach it.

Imports nothing of specbench but errors: the CLI, measure/, backends/, engine/ and the trainer
may all read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specbench.errors import SpecbenchError

GAMMA_LIMIT = 128  # the largest γ anywhere: sweep gammas, run --gamma, recommend/plot --max-gamma
MAX_TOKENS = 2**20  # new tokens per turn, context lengths: no model's window is longer
MAX_PROMPTS = 1_000_000  # prompts per workload (the largest built-in one has 17,671)
MAX_BATCH = 4096  # sequences in one forward / requests in flight


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` (``low`` itself excluded when ``open_low``); ``integer`` or real.

    ``zero_or_from``: besides 0 only values >= it (a temperature is 0, greedy, or >= 1e-3).
    """

    low: float
    high: float
    integer: bool
    reason: str
    open_low: bool = False
    zero_or_from: float | None = None

    def describe(self) -> str:
        """'an integer from 1 to 128', 'a number > 0 and <= 86400', '0 or a number from 0.001 to 100'."""
        what = "an integer" if self.integer else "a number"
        low, high = _show(self.low), _show(self.high)
        if self.zero_or_from is not None:
            return f"0 or {what} from {_show(self.zero_or_from)} to {high}"
        if self.open_low:
            return f"{what} > {low} and <= {high}"
        return f"{what} from {low} to {high}"


def _show(x: float) -> str:
    """A bound as people write it: 128, 0.001, 2^20, 2,147,483,647."""
    if isinstance(x, int) or float(x).is_integer():
        n = int(x)
        if abs(n) >= 2**16 and abs(n) & (abs(n) - 1) == 0:
            return f"{'-' if n < 0 else ''}2^{abs(n).bit_length() - 1}"
        return f"{n:,}" if abs(n) >= 100_000 else str(n)
    return f"{x:g}"


_TOKENS = "no model's context window holds more than 2^20 tokens; the model's own window is checked after it loads"
_SECONDS = "a request or a start-up taking more than a day is hung, not slow"

BOUNDS: dict[str, Bound] = {
    # ---- what one generation does (run and sweep alike)
    "gamma": Bound(
        0,
        GAMMA_LIMIT,
        True,
        "draft tokens per round: even at α = 0.95 a round of 128 drafts "
        "yields 19.97 tokens on average, (1 − α^129) / (1 − α), and any number of further drafts adds "
        "at most 0.14 %",
    ),
    "max_new_tokens": Bound(1, MAX_TOKENS, True, _TOKENS),
    "temperature": Bound(
        0,
        100,
        False,
        "0 is greedy; below 0.001 logits ÷ T overflow 16-bit floats (and "
        "1e-300 overflows every float); above 100 the distribution is uniform to float precision",
        zero_or_from=1e-3,
    ),
    "top_p": Bound(0, 1, False, "a probability mass", open_low=True),
    "top_k": Bound(0, 2**31 - 1, True, "0 is off; a cut beyond the vocabulary is off too, and must fit a 32-bit index"),
    "seed": Bound(-(2**63), 2**63 - 1, True, "a 64-bit seed (torch's generator takes 64 bits)"),
    "threads": Bound(1, 1024, True, "torch starts one CPU thread per count; more threads than cores only contend"),
    # ---- the sweep grid
    "prompts": Bound(
        1,
        MAX_PROMPTS,
        True,
        "prompts per workload: the largest built-in workload has 17,671; the unit limit bounds the grid as well",
    ),
    "repeats": Bound(1, 1000, True, "timed repeats of one unit: the timing protocol re-times disturbed units already"),
    "request_rate": Bound(
        1e-3,
        100_000,
        False,
        "requests per second of open-loop load: below 0.001 (one request per 17 minutes) a batch waits hours for "
        "its arrivals; above 100,000 arrivals come closer together than a client sends requests",
    ),
    "concurrency": Bound(
        1,
        MAX_BATCH,
        True,
        "requests in flight: each holds a socket, and 4096 approaches the default limit of open files",
    ),
    "timing.warmup_s": Bound(
        0, 600, False, "ten minutes of untimed decoding is more than any engine needs to reach a steady state"
    ),
    "timing.max_other_cores": Bound(0, 4096, False, "busy cores of other processes tolerated while timing"),
    "timing.retries": Bound(0, 100, True, "re-timings of a disturbed unit: each costs a whole block"),
    "adaptive.calibration_batch": Bound(0, MAX_PROMPTS, True, "timed prompts added per look (mode replay)"),
    "adaptive.budget_s": Bound(
        0, 30 * 24 * 3600, False, "an adaptive sweep's wall-time budget: 30 days", open_low=True
    ),
    # ---- analysis (fit, recommend, plot)
    "bootstrap": Bound(
        0,
        10_000,
        True,
        "replicates hold replicates × prompts floats (10,000 × 17,671 prompts "
        "is 1.4 GB); beyond 10,000 the Monte-Carlo error is far below the interval's own",
    ),
    "price_per_hour": Bound(
        0,
        1_000_000,
        False,
        "the machine's price per hour (any currency): a million an hour is beyond any machine's rent",
        open_low=True,
    ),
    "margin": Bound(0, 1, False, "a relative margin: 0.05 is 5 %; 1 would call a halving equivalent", open_low=True),
    "max_gamma": Bound(1, GAMMA_LIMIT, True, "the largest γ predicted: no sweep may measure γ above 128"),
    "batch": Bound(
        1,
        MAX_BATCH,
        True,
        "sequences per forward: vLLM batches at most 1024 by default, and a forward's activations grow with the batch",
    ),
    "context": Bound(1, MAX_TOKENS, True, _TOKENS),
    # ---- profile
    "verify_tokens": Bound(1, GAMMA_LIMIT + 1, True, "tokens one verify forward checks: γ + 1 for γ up to 128"),
    "profile.repeats": Bound(1, 10_000, True, "timed calls per cell: the median settles long before"),
    "profile.warmup": Bound(0, 1000, True, "untimed calls per cell"),
    # ---- train-drafter
    "train.tokens": Bound(2, 100_000_000, True, "answer tokens generated by the target: 10^8 is weeks of CPU"),
    "train.epochs": Bound(1, 1000, True, "passes over the training sequences"),
    "train.lr": Bound(0, 10, False, "AdamW's peak learning rate: above 10 every step diverges", open_low=True),
    "train.max_minutes": Bound(0, 10_080, False, "a week", open_low=True),
    "train.draft_vocab": Bound(0, MAX_TOKENS, True, "0 is the full vocabulary; no tokenizer has 2^20 tokens"),
    "train.batch_tokens": Bound(
        16, MAX_TOKENS, True, "padded positions per optimizer step: the activations grow with it"
    ),
    "train.steps": Bound(1, 64, True, "unrolled training steps: each one is a drafter forward per position"),
    "train.heads": Bound(
        1,
        64,
        True,
        "Medusa heads: each is a hidden × hidden block (64 heads of a 4096-wide "
        "target are a billion parameters), and a draft is at most as deep as the heads",
    ),
    "train.modules": Bound(1, 16, True, "MTP modules: each is a transformer layer"),
    "train.intermediate": Bound(
        1, 65_536, True, "MLP width of the drafter layer: the largest open models use about 30,000"
    ),
    # ---- serving backends (backend: {name: ..., option: value})
    "timeout_s": Bound(0, 86_400, False, _SECONDS, open_low=True),
    "startup_timeout_s": Bound(0, 86_400, False, _SECONDS, open_low=True),
    "stop_grace_s": Bound(0, 600, False, "SIGTERM to SIGKILL of a server specbench started"),
    "port": Bound(1, 65_535, True, "a TCP port"),
    "max_model_len": Bound(16, MAX_TOKENS, True, _TOKENS),
    "kv_cache_gib": Bound(0, 65_536, False, "GiB of KV cache: more than any machine's memory", open_low=True),
    "max_num_seqs": Bound(1, MAX_BATCH, True, "requests vLLM batches at once"),
    "parallel_size": Bound(1, 1024, True, "GPUs or stages a model is split over"),
    "gpu_memory_utilization": Bound(0, 1, False, "a fraction of GPU memory", open_low=True),
    "warmup_tokens": Bound(0, 1024, True, "untimed tokens when an engine starts"),
    "engines_kept": Bound(1, 16, True, "vLLM engines kept alive at once: each holds its own copy of the model"),
}


def violation(name: str, value) -> str | None:
    """What is wrong with ``value`` for the row ``name`` ('must be ..., got ... (why)'), or None."""
    bound = BOUNDS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be {bound.describe()}, got {_short(value)}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be {bound.describe()} (a finite number), got {value}"
    if bound.integer and isinstance(value, float) and not value.is_integer():
        return f"must be {bound.describe()}, got {value}"
    below = value <= bound.low if bound.open_low else value < bound.low
    if bound.zero_or_from is not None and value != 0 and value < bound.zero_or_from:
        below = True
    if below or value > bound.high:
        return f"must be {bound.describe()}, got {_short(value)} ({bound.reason})"
    return None


def check(name: str, value, where: str = "", key: str | None = None):
    """``value`` as an int (integer rows) or float, or a one-line `SpecbenchError`:
    ``WHERE: 'KEY' must be ..., got ... (reason)``."""
    problem = violation(name, value)
    if problem is not None:
        label = f"'{key or name}' {problem}"
        raise SpecbenchError(f"{where}: {label}" if where else label)
    return int(value) if BOUNDS[name].integer else float(value)


def check_optional(name: str, value, where: str = "", key: str | None = None):
    """`check`, with None passed through (an option left unset)."""
    return None if value is None else check(name, value, where, key)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def int_list(text: str, name: str, flag: str) -> tuple[int, ...]:
    """'1,4,16', '1..16' or '1..4,8' → the sorted distinct integers, each inside the row ``name``.

    A range is checked at its ends before it is expanded (``1..1000000000`` is refused, not built).
    """
    values: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            continue
        ends = part.split("..", 1)
        if not all(e.isascii() and e.lstrip("-").isdigit() and len(e) <= 20 for e in ends):
            raise SpecbenchError(f"{flag}: '{_short(part)[1:-1]}' is not an integer or a range A..B")
        numbers = [int(e) for e in ends]
        for n in numbers:
            problem = violation(name, n)
            if problem is not None:
                raise SpecbenchError(f"{flag}: {problem}")
        if len(numbers) == 2 and numbers[1] < numbers[0]:
            raise SpecbenchError(f"{flag}: range '{part}' runs backwards")
        values.update(range(numbers[0], numbers[-1] + 1))
    if not values:
        raise SpecbenchError(f"{flag}: no values given")
    return tuple(sorted(values))
